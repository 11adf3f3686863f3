"""DescribeUserScramCredentials (API key 50): version 0, flexible."""
from ..schema import F, message

DescribeUserScramCredentialsRequest = message('DescribeUserScramCredentialsRequest', 50, '0', flexible='0+',
    fields=[
        F('users', '[]UserName', '0+', nullable='0+', fields=[
            F('name', 'string', '0+'),
        ]),
])

DescribeUserScramCredentialsResponse = message('DescribeUserScramCredentialsResponse', 50, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('results', '[]DescribeUserScramCredentialsResult', '0+', fields=[
            F('user', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('credential_infos', '[]CredentialInfo', '0+', fields=[
                F('mechanism', 'int8', '0+'),
                F('iterations', 'int32', '0+'),
            ]),
        ]),
])
