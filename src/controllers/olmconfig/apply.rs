//! What a round writes: the OLMConfig itself when there is none (created from the flags, never
//! changed by them afterwards), and its status.

use kube::api::{Api, PostParams};

use super::context::{Error, FIELD_MANAGER, OlmConfigContext};
use crate::api::{OLM_CONFIG_NAME, OlmConfig, OlmConfigSpec, OlmConfigStatus};
use crate::controllers::kit::apply_status;

/// Creates the OLMConfig `cluster` with the flags' settings; one made meanwhile by someone
/// else (another OLM, an admin) is left as it is.
pub(super) async fn create(ctx: &OlmConfigContext) -> Result<(), Error> {
    let spec = OlmConfigSpec::seed(ctx.shared.settings.disable_copied_csvs);
    let config = OlmConfig::new(OLM_CONFIG_NAME, spec);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let api: Api<OlmConfig> = Api::all(ctx.shared.client.clone());
    match api.create(&params, &config).await {
        Ok(_) => {
            tracing::info!(
                name = OLM_CONFIG_NAME,
                disable_copied_csvs = ctx.shared.settings.disable_copied_csvs,
                "created the OLMConfig"
            );
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(Error::Create { error }),
    }
}

/// Writes `status` to the OLMConfig.
pub(super) async fn write_status(
    ctx: &OlmConfigContext,
    config: &OlmConfig,
    status: &OlmConfigStatus,
) -> Result<(), Error> {
    apply_status(ctx, config, status)
        .await
        .map(drop)
        .map_err(|error| Error::WriteStatus { error })
}
