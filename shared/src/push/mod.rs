//! Web Push subscriptions (`subscriptions`). Sending a push is an adapter
//! (`crate::adapters::push`); who gets one for a message is the notification consumer's
//! (`crate::notify`).

pub mod subscriptions;
