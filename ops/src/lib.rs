//! The operations side: the store audit (`fulfillment audit`: the books, the rules every
//! finished order must keep, a second look before anything is reported) and the repair loop that
//! fixes, inside `serve`, what the audit finds wherever a rule names a safe remedy.

pub mod audit;
pub mod repair;
