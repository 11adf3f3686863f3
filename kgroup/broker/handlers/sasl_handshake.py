"""SaslHandshake reaching the handlers: on a listener without SASL, or after authentication
(a re-authentication is taken by authentication.py before this); KafkaApis answers
ILLEGAL_SASL_STATE."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.sasl_handshake import SaslHandshakeResponse


def handle(broker, ctx, req, version):
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
