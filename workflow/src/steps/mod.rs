//! The saga's steps and their registry. Each step is one file, declaring itself beside its
//! code (`step::Declared`: its activity, the errors it may raise, the ports it needs); the forward
//! steps live here, the undos in `compensations`. [`saga_steps!`] below lists each step once, by
//! its type, whose name is also its Task state's in `order_saga.asl.json`, and derives from that
//! list the [`Activity`] table the rest of the service uses: the placeholders the definition is
//! rendered with, the activities provisioned and served, the steps the workers run
//! ([`for_activity`]) and the lists the tests check the definition and the deployment template
//! against.
//!
//! A forward step loads the order by the id in its input, does its one side effect idempotently
//! (keyed by the order id, never by an attempt), moves the order's status forward, and reports an
//! outcome with an [`ErrorName`](step::ErrorName).

use crate::definition;
use std::sync::Arc;
use step::{Declaration, Declared, Step, StepContext};
use store::Ports;
use telemetry::Metrics;

/// Declares the registry: the forward steps in the order the definition runs them, each as
/// `module::Type` (its file in this folder), then the compensations in the order they run, each
/// a type of the `compensations` crate.
macro_rules! saga_steps {
    (
        forward { $($module:ident :: $forward:ident,)+ }
        compensations { $($undo:ident,)+ }
    ) => {
        $(pub mod $module;)+
        $(pub use $module::$forward;)+
        pub use compensations::{$($undo),+};

        /// The saga's activities, one per step: the variant's name is the step's type and its
        /// Task state's name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Activity {
            $($forward,)+
            $($undo,)+
        }

        impl Activity {
            pub const ALL: [Activity; [$(stringify!($forward),)+ $(stringify!($undo),)+].len()] =
                [$(Activity::$forward,)+ $(Activity::$undo,)+];

            /// The forward steps, in the order the definition runs them.
            pub const FORWARD: [Activity; [$(stringify!($forward)),+].len()] =
                [$(Activity::$forward),+];

            /// The compensations, in the order they run.
            pub const COMPENSATIONS: [Activity; [$(stringify!($undo)),+].len()] =
                [$(Activity::$undo),+];

            /// What the step says of itself.
            pub fn declaration(self) -> &'static Declaration {
                match self {
                    $(Activity::$forward => &<$forward as Declared>::DECLARATION,)+
                    $(Activity::$undo => &<$undo as Declared>::DECLARATION,)+
                }
            }

            /// The Task state that runs it: the step's name.
            pub fn state(self) -> &'static str {
                match self {
                    $(Activity::$forward => stringify!($forward),)+
                    $(Activity::$undo => stringify!($undo),)+
                }
            }

            /// The placeholder in the definition (without `${` `}`): the state's name with
            /// `ActivityArn` appended.
            pub fn placeholder(self) -> &'static str {
                match self {
                    $(Activity::$forward => concat!(stringify!($forward), "ActivityArn"),)+
                    $(Activity::$undo => concat!(stringify!($undo), "ActivityArn"),)+
                }
            }

            fn build(self, cx: &StepContext) -> Arc<dyn Step> {
                match self {
                    $(Activity::$forward => Arc::new(<$forward as Declared>::build(cx)),)+
                    $(Activity::$undo => Arc::new(<$undo as Declared>::build(cx)),)+
                }
            }
        }
    };
}

saga_steps! {
    forward {
        reserve::ReserveInventory,
        charge::ChargePayment,
        approval::AwaitApproval,
        ship::CreateShipment,
    }
    compensations {
        ReleaseInventory,
        RefundPayment,
    }
}

impl Activity {
    /// The activity's name (the last part of its ARN).
    pub fn name(self) -> &'static str {
        self.declaration().activity
    }

    /// Whether the step undoes another's side effect.
    pub fn is_compensation(self) -> bool {
        Activity::COMPENSATIONS.contains(&self)
    }

    /// The activity whose Task state is `state`.
    pub fn of_state(state: &str) -> Option<Activity> {
        Activity::ALL.into_iter().find(|a| a.state() == state)
    }
}

/// The step that serves `activity`, over `ports`, counting the sagas it ends in `metrics`.
pub fn for_activity(activity: Activity, ports: &Ports, metrics: &Metrics) -> Arc<dyn Step> {
    activity.build(&StepContext {
        ports: ports.clone(),
        metrics: metrics.clone(),
        state: activity.state(),
        transient_retries: definition::transient_retries(activity.state()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use step::ErrorName;

    #[test]
    fn activity_names_are_unique_and_prefixed() {
        let names: HashSet<_> = Activity::ALL.iter().map(|a| a.name()).collect();
        assert_eq!(names.len(), Activity::ALL.len());
        assert!(
            names.iter().all(|n| n.starts_with("fulfillment-")),
            "{names:?}"
        );
    }

    /// Every error name is raised by some step (or, for a decision or a closed window, answered
    /// to the approval step's token), so none is dead and none is missing from a declaration.
    #[test]
    fn every_error_name_is_raised_by_a_declared_step() {
        let raised: HashSet<ErrorName> = Activity::ALL
            .iter()
            .flat_map(|a| a.declaration().raised())
            .collect();
        let missing: Vec<_> = ErrorName::ALL
            .into_iter()
            .filter(|n| !raised.contains(n))
            .collect();
        assert!(missing.is_empty(), "raised by no step: {missing:?}");
    }

    /// A step lists only its own errors (the ones every step may raise are implied), and every
    /// step reads its order from the store.
    #[test]
    fn declarations_list_their_own_errors_and_every_step_needs_the_orders() {
        for a in Activity::ALL {
            let d = a.declaration();
            let implied: Vec<_> = d
                .raises
                .iter()
                .filter(|e| step::EVERY_STEP_RAISES.contains(e))
                .collect();
            assert!(implied.is_empty(), "{a:?} repeats {implied:?}");
            assert!(d.needs.contains(&step::Port::Orders), "{a:?}");
        }
    }
}
