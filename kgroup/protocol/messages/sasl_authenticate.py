"""SaslAuthenticate (API key 36): versions 0-2, flexible 2+ (KIP-152 framing of SASL tokens)."""
from ..schema import F, message

SaslAuthenticateRequest = message('SaslAuthenticateRequest', 36, '0-2', flexible='2+',
    fields=[
        F('auth_bytes', 'bytes', '0+'),
])

SaslAuthenticateResponse = message('SaslAuthenticateResponse', 36, '0-2', flexible='2+',
    fields=[
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('auth_bytes', 'bytes', '0+'),
        F('session_lifetime_ms', 'int64', '1+', default=0),
])
