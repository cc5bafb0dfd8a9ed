//! The kinds of what the repair loop does, the label of `fulfillment_repairs_total`.

/// What a pass did about one finding; each kind is a label of `fulfillment_repairs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepairKind {
    /// An order left `ACCEPTED` past the grace period: its execution started.
    Started,
    /// A CANCELLED order's charge that nothing was given back of: refunded (`refund:{order}`,
    /// the saga's key) and the refund recorded on the order.
    RefundedLateCharge,
    /// Stock still held by a finished order: released (CANCELLED) or marked shipped
    /// (COMPLETED, its shipment made).
    ReleasedStock,
    /// An order whose execution ended with the order unfinished and no incident recorded:
    /// the incident recorded (the order `COMPENSATION_FAILED`), for operators to act on.
    IncidentRecorded,
    /// A finding no remedy may fix alone (a double charge, a COMPLETED order without a charge,
    /// an execution that does not exist under a running order, …): logged for a person, never
    /// touched.
    Reported,
}

impl RepairKind {
    pub const ALL: [RepairKind; 5] = [
        RepairKind::Started,
        RepairKind::RefundedLateCharge,
        RepairKind::ReleasedStock,
        RepairKind::IncidentRecorded,
        RepairKind::Reported,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RepairKind::Started => "started",
            RepairKind::RefundedLateCharge => "refunded_late_charge",
            RepairKind::ReleasedStock => "released_stock",
            RepairKind::IncidentRecorded => "incident_recorded",
            RepairKind::Reported => "reported",
        }
    }
}
