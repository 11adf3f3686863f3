"""DescribeConfigs (32) v1-4 (v0 removed by KIP-896) for TOPIC (2), BROKER (4) and GROUP (32) resources: every config or
the requested keys, with Kafka's config sources (TOPIC_CONFIG 1, DYNAMIC_BROKER_CONFIG 2,
DYNAMIC_DEFAULT_BROKER_CONFIG 3, STATIC_BROKER_CONFIG 4, DEFAULT_CONFIG 5, GROUP_CONFIG 8) and,
when asked, synonyms and documentation."""
from ...protocol.errors import ErrorCode
from .. import client_metrics
from ...protocol.messages.describe_configs import DescribeConfigsResponse
from ..config import CONFIG_DEFS
from ..metadata import TOPIC_CONFIGS
from .. import group_configs
from ..admin import DYNAMIC_BROKER_CONFIGS, config_resource_denied
from ..topic_configs import TOPIC_CONFIG_DEFS, broker_synonym_source
from ...security.acl import DESCRIBE_CONFIGS

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType (KIP-569): BOOLEAN 1, STRING 2, INT 3, SHORT 4, LONG 5, DOUBLE 6, LIST 7
CLIENT_METRICS_CONFIG = 7         # DescribeConfigsResponse.ConfigSource
_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "password": 9}


def handle(broker, ctx, req, version):
    resp = DescribeConfigsResponse(throttle_time_ms=0, results=[])
    for res in req.resources:
        result = Result(error_code=0, error_message=None, resource_type=res.resource_type,
                        resource_name=res.resource_name, configs=[])
        denied = config_resource_denied(broker, ctx, DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if denied is not None:      # KafkaApis: DESCRIBE_CONFIGS on the topic, the cluster, the group
            result.error_code = denied
            resp.results.append(result)
            continue
        if res.resource_type == TOPIC:
            topic = broker.metadata.get(res.resource_name)
            if topic is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"Topic {res.resource_name} does not exist."
            else:
                for name, (value, explicit) in broker.metadata.topic_config(topic).items():
                    if res.configuration_keys is not None and name not in res.configuration_keys:
                        continue
                    synonyms = []
                    if req.include_synonyms:
                        if explicit:
                            synonyms.append(Synonym(name=name, value=value, source=TOPIC_CONFIG))
                        broker_key = broker_synonym_source(broker.config, name)
                        if broker_key is not None and broker_key in CONFIG_DEFS:
                            synonyms.append(Synonym(name=broker_key, value=_broker_default(broker, name),
                                                    source=_broker_source(broker, broker_key)))
                    # Kafka's ConfigHelper: a default's source is its broker synonym's (static config)
                    broker_key = broker_synonym_source(broker.config, name)
                    source = TOPIC_CONFIG if explicit else (
                        _broker_source(broker, broker_key) if broker_key in CONFIG_DEFS else DEFAULT_CONFIG)
                    result.configs.append(Entry(
                        name=name, value=value, read_only=False,
                        config_source=source, is_sensitive=False, synonyms=synonyms,
                        config_type=_TYPES[TOPIC_CONFIGS[name][1]],
                        documentation=TOPIC_CONFIG_DEFS[name].doc if req.include_documentation else None))
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.config.node_id)):
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Unexpected broker id, expected {broker.config.node_id} but received {res.resource_name}"
            else:
                for name, defn in sorted(CONFIG_DEFS.items()):
                    if res.configuration_keys is not None and name not in res.configuration_keys:
                        continue
                    value = broker.config[name]
                    value = None if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
                    sensitive = defn.type == "password"     # Kafka never describes a password's value
                    if sensitive:
                        value = None
                    source = _broker_source(broker, name)
                    result.configs.append(Entry(
                        name=name, value=value, read_only=name not in DYNAMIC_BROKER_CONFIGS, config_source=source,
                        is_sensitive=sensitive,
                        synonyms=_broker_synonyms(broker, name) if req.include_synonyms else [],
                        config_type=_TYPES[defn.type],
                        documentation=defn.doc if req.include_documentation else None))
        elif res.resource_type == group_configs.GROUP:
            if not res.resource_name:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = "Group name must not be empty"
            else:
                overrides = broker.metadata.group_configs.get(res.resource_name, {})
                for name, value in sorted(group_configs.effective(broker, res.resource_name).items()):
                    if res.configuration_keys is not None and name not in res.configuration_keys:
                        continue
                    source = group_configs.GROUP_CONFIG_SOURCE if name in overrides else DEFAULT_CONFIG
                    value = group_configs.as_string(value)
                    result.configs.append(Entry(
                        name=name, value=value, read_only=False, config_source=source, is_sensitive=False,
                        synonyms=[Synonym(name=name, value=value, source=source)] if req.include_synonyms else [],
                        config_type=_TYPES[group_configs.GROUP_CONFIG_DEFS[name].type],
                        documentation=group_configs.GROUP_CONFIG_DEFS[name].doc if req.include_documentation
                        else None))
        elif res.resource_type == client_metrics.CLIENT_METRICS:
            # a subscription's three configs, its own values or the defaults (ClientMetricsConfigs)
            own = broker.metadata.client_metrics.configs(res.resource_name)
            defaults = {client_metrics.METRICS: "", client_metrics.INTERVAL_MS: str(client_metrics.INTERVAL_MS_DEFAULT),
                        client_metrics.MATCH: ""}
            for name, default in defaults.items():
                if res.configuration_keys is not None and name not in res.configuration_keys:
                    continue
                source = CLIENT_METRICS_CONFIG if name in own else DEFAULT_CONFIG
                value = own.get(name, default)
                result.configs.append(Entry(
                    name=name, value=value, read_only=False, config_source=source, is_sensitive=False,
                    synonyms=[Synonym(name=name, value=value, source=source)] if req.include_synonyms else [],
                    config_type=_TYPES["int" if name == client_metrics.INTERVAL_MS else "list"], documentation=None))
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Unsupported resource type {res.resource_type}"
        resp.results.append(result)
    return resp


def _broker_source(broker, key):
    return broker.config.source(key)


def _broker_synonyms(broker, key):
    """Every layer that sets the key, highest precedence first (Kafka's DescribeConfigs)."""
    c = broker.config
    layers = [(c.dynamic_broker, 2), (c.dynamic_default, 3), (c.explicit, STATIC_BROKER_CONFIG)]
    out = [Synonym(name=key, value=_text(layer[key]), source=src) for layer, src in layers if key in layer]
    default = CONFIG_DEFS[key].default
    if default is not None or not out:
        out.append(Synonym(name=key, value=_text(default), source=DEFAULT_CONFIG))
    if CONFIG_DEFS[key].type == "password":
        for s in out:
            s.value = None
    return out


def _text(v):
    return None if v is None else (str(v).lower() if isinstance(v, bool) else str(v))


def _broker_default(broker, topic_key):
    from ..metadata import broker_default_for
    return broker_default_for(broker.config, topic_key)
