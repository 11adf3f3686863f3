"""SaslHandshake (API key 17): versions 0-1, not flexible."""
from ..schema import F, message

SaslHandshakeRequest = message('SaslHandshakeRequest', 17, '0-1', flexible='none',
    fields=[
        F('mechanism', 'string', '0+'),
])

SaslHandshakeResponse = message('SaslHandshakeResponse', 17, '0-1', flexible='none',
    fields=[
        F('error_code', 'int16', '0+'),
        F('mechanisms', '[]string', '0+'),
])
