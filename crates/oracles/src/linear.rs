//! PLACEHOLDER: being written (see issue 3).
use crate::{Model, OracleError};
/// Registry name.
pub const KIND: &str = "linear";
/// Loader for the registry.
pub fn load(_bytes: &[u8]) -> Result<Box<dyn Model>, OracleError> {
    Err(OracleError::UnknownKind(KIND.to_string()))
}
