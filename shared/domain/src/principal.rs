//! Who is calling: the identity every use case acts for, as authentication established it.

use crate::ids::UserId;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: UserId,
    /// Display name: the `name` claim, else the user id.
    pub name: String,
}
