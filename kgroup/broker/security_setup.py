"""The broker's security, built once from its configuration: per listener the TLS context and
principal builder (tls.py) and the SASL mechanisms (authentication.py's ``SaslGate`` asks
``ListenerSasl`` for a mechanism server), the durable SCRAM credentials, and the authorizer
(None unless ``authorizer.class.name`` is set)."""
from __future__ import annotations

from ..security import scram
from ..security.jaas import login_options
from ..security.plain import PlainServer, plain_users
from .config import BrokerConfig, ConfigError, ListenerSpec
from ..security.acl import StandardAuthorizer
from .acl_store import AUTHORIZER_CLASSES, AclStore
from .scram_credentials import ScramCredentialStore

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class ListenerSasl:
    """A SASL listener's enabled mechanisms and how to make a server for each."""

    def __init__(self, config: BrokerConfig, spec: ListenerSpec, credentials: ScramCredentialStore):
        self.config = config
        self.listener = spec.name
        self.credentials = credentials
        self.mechanisms = config.enabled_mechanisms(spec.name)
        self.plain_users: dict[str, str] = {}
        self.oauth_options: dict[str, str] = {}
        for mech in self.mechanisms:
            if mech not in SUPPORTED_MECHANISMS:
                raise ConfigError(f"SASL mechanism {mech} on listener {spec.name} is not supported "
                                  f"(kgroup supports {', '.join(SUPPORTED_MECHANISMS)})")
            jaas = config.for_listener(spec.name, "sasl.jaas.config", mech)
            try:
                options = login_options(jaas)
            except ValueError as e:
                raise ConfigError(f"listener.name.{spec.name.lower()}.{mech.lower()}.sasl.jaas.config: {e}") from None
            if mech == "PLAIN":
                if jaas is None:
                    raise ConfigError(f"Could not find a 'KafkaServer' or 'listener.name.{spec.name.lower()}"
                                      f".plain.sasl.jaas.config' entry for the PLAIN mechanism")
                self.plain_users = plain_users(options)
            elif mech == "OAUTHBEARER":
                self.oauth_options = options

    def new_server(self, mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism in scram.MECHANISMS:
            name = mechanism
            return scram.ScramServer(scram.MECHANISMS[name], lambda user: self.credentials.lookup(name, user))
        if mechanism == "OAUTHBEARER":
            from ..security.oauthbearer import UnsecuredOAuthBearerServer
            return UnsecuredOAuthBearerServer(self.oauth_options)
        raise ConfigError(mechanism)

    def max_reauth_ms(self, mechanism: str) -> int:
        v = self.config.for_listener(self.listener, "connections.max.reauth.ms", mechanism)
        return int(v or 0)


class BrokerSecurity:
    def __init__(self, config: BrokerConfig, data_dir: str):
        self.config = config
        self.credentials = ScramCredentialStore(data_dir)
        self.specs = config.listener_specs()
        self.sasl: dict[str, ListenerSasl] = {s.name: ListenerSasl(config, s, self.credentials)
                                             for s in self.specs if s.uses_sasl}
        self.authorizer = None
        self.acls = None
        name = (config["authorizer.class.name"] or "").strip()
        if name:
            if name not in AUTHORIZER_CLASSES:
                raise ConfigError(f"authorizer.class.name={name}: kgroup provides Kafka's StandardAuthorizer "
                                  f"({' or '.join(AUTHORIZER_CLASSES)})")
            self.authorizer = StandardAuthorizer(config["super.users"], config["allow.everyone.if.no.acl.found"])
            self.acls = AclStore(data_dir, self.authorizer)
        self._inter_broker_client = None
        self._inter_broker_resolved = False
        if config["zookeeper.connect"]:     # a cluster's broker: bad inter-broker settings fail the start
            _ = self.inter_broker_client
        self.ssl_contexts = {}
        self.principal_builders = {}
        if any(s.uses_ssl for s in self.specs):
            from .tls import SslPrincipalBuilder, server_context
            for s in self.specs:
                if s.uses_ssl:
                    self.ssl_contexts[s.name] = server_context(config, s.name)
                    self.principal_builders[s.name] = SslPrincipalBuilder(
                        config.for_listener(s.name, "ssl.principal.mapping.rules"))

    @property
    def inter_broker_client(self):
        """This broker's client side towards the others (inter_broker.py's ``client_security``:
        None for PLAINTEXT), built once."""
        if not self._inter_broker_resolved:
            from .inter_broker import client_security
            self._inter_broker_client = client_security(self.config)
            self._inter_broker_resolved = True
        return self._inter_broker_client
