"""UpdateFeatures (57) v0-2: finalize feature levels (KIP-584, KIP-1022), all or nothing, with the
controller's checks (features.py). v0 says downgrade with ``allow_downgrade`` (a safe downgrade),
v1+ with ``upgrade_type``; v0-1 answer a result per feature when all succeed, v2 none
(QuorumController.updateFeatures). A refused update fails every feature with the message Kafka
gives."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.update_features import UpdateFeaturesResponse
from ..admin import after_writes
from ..authorization import ALTER, CLUSTER_NAME, RT_CLUSTER, allowed
from ..features import SAFE_DOWNGRADE, UPGRADE

Result = UpdateFeaturesResponse.UpdatableFeatureResult


def handle(broker, ctx, req, version):
    if not allowed(broker, ctx, ALTER, RT_CLUSTER, CLUSTER_NAME):      # ControllerApis: CLUSTER ALTER
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                      error_message=ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message, results=[])
    updates = {}
    for u in req.feature_updates:
        kind = u.upgrade_type if version >= 1 else (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE)
        updates[u.feature] = (u.max_version_level, kind)
    try:
        broker.metadata.features.update(updates, validate_only=version >= 1 and req.validate_only)
    except KafkaError as e:
        return UpdateFeaturesResponse(
            throttle_time_ms=0, error_code=int(e.code),
            error_message=f"The update failed for all features since the following feature had an error: {e}",
            results=[])
    results = [Result(feature=u.feature, error_code=0, error_message=None) for u in req.feature_updates] \
        if version <= 1 else []
    resp = UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)

    def failed(_errors):
        """The FeatureZNode could not be written: KafkaController.processFeatureUpdates fails each
        feature with FEATURE_UPDATE_FAILED (v2, which has no per-feature results: the request)."""
        error, message = int(ErrorCode.FEATURE_UPDATE_FAILED), ErrorCode.FEATURE_UPDATE_FAILED.message
        if version >= 2:
            resp.error_code, resp.error_message = error, message
        for r in resp.results:
            r.error_code, r.error_message = error, message
    return after_writes(broker, resp, failed)
