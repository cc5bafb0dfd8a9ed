//! `Sku`: one Restate virtual object per SKU (the key is the SKU name), holding its stock, its
//! catalog price and every order's reservation of it.
//!
//! Restate runs at most one exclusive handler per key at a time, so `reserve` and `release` read,
//! check and write the stock without any lock or compare-and-set of ours: no oversell comes from
//! the object's single writer, and the state a handler writes is committed together with its
//! result (one journal, one log), so a retried or replayed call sees its own earlier write.
//!
//! State of `Sku/<name>` (all JSON, so the admin SQL reads it from `state.value_utf8`):
//!
//! | key | value |
//! |---|---|
//! | `available` | units on the shelf now |
//! | `priceCents` | the catalog price, set by `restock` |
//! | `given` | all the stock ever handed to this SKU (for the audit: given = available + held) |
//! | `r:<orderId>` | `{"quantity":q,"released":bool}`: what that order reserved, and whether it was given back |

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

/// `restock`'s body: the stock on the shelf from now on, and the catalog price.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Restock {
    pub available: i64,
    pub price_cents: i64,
}

/// `reserve`'s body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReserveRequest {
    pub order_id: String,
    pub quantity: i64,
}

/// `reserve`'s answer: whether the order now holds its quantity, and the catalog price the saga
/// must charge (never the caller's `unitPriceCents`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reserved {
    pub ok: bool,
    pub price_cents: i64,
}

/// `release`'s body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRequest {
    pub order_id: String,
}

/// What one order holds of this SKU (state `r:<orderId>`). Kept after release, marked, so the
/// audit sees every reservation ever made and a second release finds nothing left to give back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub quantity: i64,
    pub released: bool,
}

const AVAILABLE: &str = "available";
const PRICE: &str = "priceCents";
const GIVEN: &str = "given";

fn reservation_key(order_id: &str) -> String {
    format!("r:{order_id}")
}

pub struct Sku;

#[restate_sdk::object(name = "Sku")]
impl Sku {
    /// Sets the shelf stock and the catalog price. `given` moves by the same amount as
    /// `available`, so the audit's equation (given = available + Σ held) stays true whatever was
    /// reserved before: the first restock of a SKU gives it `available` units.
    #[handler]
    async fn restock(
        &self,
        ctx: ObjectContext<'_>,
        Json(restock): Json<Restock>,
    ) -> Result<(), HandlerError> {
        if restock.available < 0 || restock.price_cents < 0 {
            return Err(
                TerminalError::new_with_code(400, "available and priceCents must be ≥ 0").into(),
            );
        }
        let available = ctx.get::<i64>(AVAILABLE).await?.unwrap_or(0);
        let given = ctx.get::<i64>(GIVEN).await?.unwrap_or(0);
        ctx.set(GIVEN, given + (restock.available - available));
        ctx.set(AVAILABLE, restock.available);
        ctx.set(PRICE, restock.price_cents);
        Ok(())
    }

    /// Takes `quantity` units for `orderId` if the shelf has them. Idempotent per order: the
    /// order's reservation is looked up first, so a retried call (the saga's own call is
    /// journaled, but a caller outside Restate may repeat it) answers the same without taking the
    /// stock twice. Out of stock is an answer (`ok: false`), not an error: the saga decides what
    /// it means for the order.
    #[handler]
    async fn reserve(
        &self,
        ctx: ObjectContext<'_>,
        Json(req): Json<ReserveRequest>,
    ) -> Result<Json<Reserved>, HandlerError> {
        if req.quantity <= 0 {
            return Err(TerminalError::new_with_code(400, "quantity must be ≥ 1").into());
        }
        let price_cents = ctx.get::<i64>(PRICE).await?.unwrap_or(0);
        let key = reservation_key(&req.order_id);
        if let Some(Json(held)) = ctx.get::<Json<Reservation>>(&key).await? {
            // Already reserved: the same answer as the first time, unless it was given back since
            // (then the order no longer holds it, and reserving again would double-count).
            return Ok(Json(Reserved {
                ok: !held.released,
                price_cents,
            }));
        }
        let available = ctx.get::<i64>(AVAILABLE).await?.unwrap_or(0);
        if available < req.quantity {
            return Ok(Json(Reserved {
                ok: false,
                price_cents,
            }));
        }
        ctx.set(AVAILABLE, available - req.quantity);
        ctx.set(
            &key,
            Json(Reservation {
                quantity: req.quantity,
                released: false,
            }),
        );
        Ok(Json(Reserved {
            ok: true,
            price_cents,
        }))
    }

    /// Gives back what `orderId` reserved, once. An order that reserved nothing here (its reserve
    /// failed, or never ran) has nothing to give back: the saga registers this compensation
    /// before it reserves, as Restate's saga pattern does, so it can arrive for such an order.
    #[handler]
    async fn release(
        &self,
        ctx: ObjectContext<'_>,
        Json(req): Json<ReleaseRequest>,
    ) -> Result<(), HandlerError> {
        let key = reservation_key(&req.order_id);
        let Some(Json(held)) = ctx.get::<Json<Reservation>>(&key).await? else {
            return Ok(());
        };
        if held.released {
            return Ok(());
        }
        let available = ctx.get::<i64>(AVAILABLE).await?.unwrap_or(0);
        ctx.set(AVAILABLE, available + held.quantity);
        ctx.set(
            &key,
            Json(Reservation {
                quantity: held.quantity,
                released: true,
            }),
        );
        Ok(())
    }
}
