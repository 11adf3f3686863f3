"""SaslAuthenticate reaching the handlers (no exchange under way): KafkaApis answers
ILLEGAL_SASL_STATE."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.sasl_authenticate import SaslAuthenticateResponse


def handle(broker, ctx, req, version):
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful authentication",
                                    auth_bytes=b"")
