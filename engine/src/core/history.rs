//! AWS-shaped history events.

/// The JSON key of an event type's details object.
pub fn details_key(event_type: &str) -> String {
    let _ = event_type;
    todo!()
}
