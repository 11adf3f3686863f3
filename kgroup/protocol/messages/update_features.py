"""UpdateFeatures (API key 57): versions 0-2, flexible 0+ (KIP-584/KIP-1022: finalize feature levels;
v2 answers no per-feature results)."""
from ..schema import F, message

UpdateFeaturesRequest = message('UpdateFeaturesRequest', 57, '0-2', flexible='0+',
    fields=[
        F('timeout_ms', 'int32', '0+', default=60000),
        F('feature_updates', '[]FeatureUpdateKey', '0+', fields=[
            F('feature', 'string', '0+'),
            F('max_version_level', 'int16', '0+'),
            F('allow_downgrade', 'bool', '0'),
            F('upgrade_type', 'int8', '1+', default=1),
        ]),
        F('validate_only', 'bool', '1+', default=False),
])

UpdateFeaturesResponse = message('UpdateFeaturesResponse', 57, '0-2', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('results', '[]UpdatableFeatureResult', '0-1', fields=[
            F('feature', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        ]),
])
