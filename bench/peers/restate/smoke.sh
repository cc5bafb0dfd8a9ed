#!/usr/bin/env bash
# Smoke test of the Restate peer, by hand and end to end: installs restate-server (setup.sh),
# builds peer-restate, starts both on free loopback ports in a temporary base dir, registers the
# endpoint, then
#   1. runs one order of each outcome of the contract and checks statuses, stock, charges and
#      refunds through the admin SQL;
#   2. submits 200 orders, kill -9's restate-server in the middle, restarts it on the same base
#      dir, and checks that every accepted order finishes, once.
# Exits non-zero on the first thing that is not as the contract says (the logs' tails are
# printed). Stops every process it started. KEEP=1 keeps the temporary dir.
#
# Needs curl and jq. Takes about a minute once built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"

RESTATE_SERVER="$(bash "$ROOT/bench/peers/setup.sh" | sed -n 's/^restate-server: //p')"
[[ -x "$RESTATE_SERVER" ]] || { echo "smoke: no restate-server from setup.sh" >&2; exit 1; }
(cd "$ROOT" && cargo build --release -q -p peer-restate)
PEER="$TARGET/release/peer-restate"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/peer-restate-smoke.XXXXXX")"
SERVER_PID=""
PEER_PID=""
SUBMITTER_PID=""
FAILED=1

cleanup() {
    local pid
    # The submitters (xargs' children) first, by their parent's pid, then what we started.
    [[ -n "$SUBMITTER_PID" ]] && pkill -P "$SUBMITTER_PID" 2>/dev/null || true
    for pid in "$SUBMITTER_PID" "$PEER_PID" "$SERVER_PID"; do
        [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    done
    for pid in "$SUBMITTER_PID" "$PEER_PID" "$SERVER_PID"; do
        [[ -n "$pid" ]] && wait "$pid" 2>/dev/null || true
    done
    if [[ "$FAILED" == 1 ]]; then
        echo "--- restate-server log (tail) ---" >&2
        tail -n 30 "$WORK/server.log" >&2 2>/dev/null || true
        echo "--- peer-restate log (tail) ---" >&2
        tail -n 30 "$WORK/peer.log" >&2 2>/dev/null || true
    fi
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "smoke: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# A loopback port nobody listens on (connect refused), distinct from the ones already taken.
TAKEN=" "
free_port() {
    local port
    for _ in $(seq 1 100); do
        port=$((20000 + RANDOM % 30000))
        [[ "$TAKEN" == *" $port "* ]] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            TAKEN+="$port "
            echo "$port"
            return 0
        fi
    done
    fail "no free loopback port"
}
INGRESS_PORT="$(free_port)"
ADMIN_PORT="$(free_port)"
NODE_PORT="$(free_port)"
PEER_PORT="$(free_port)"
INGRESS="http://127.0.0.1:$INGRESS_PORT"
ADMIN="http://127.0.0.1:$ADMIN_PORT"

# Polls a URL until it answers 2xx, at most $2 seconds.
wait_http() {
    local deadline=$((SECONDS + ${2:-30}))
    until curl -sf -o /dev/null "$1"; do
        ((SECONDS < deadline)) || fail "$1 did not come up"
        sleep 0.2
    done
}

start_server() {
    # Every port on loopback, TCP only (no unix sockets in the base dir), a fixed node name so
    # the data lives in $WORK/restate/n1 across restarts.
    RESTATE_INGRESS__BIND_ADDRESS="127.0.0.1:$INGRESS_PORT" \
    RESTATE_ADMIN__BIND_ADDRESS="127.0.0.1:$ADMIN_PORT" \
    RESTATE_BIND_ADDRESS="127.0.0.1:$NODE_PORT" \
    RESTATE_LISTEN_MODE=tcp \
    RESTATE_NODE_NAME=n1 \
    RESTATE_DISABLE_TELEMETRY=true \
        "$RESTATE_SERVER" --base-dir "$WORK/restate" --no-logo --log-format compact \
        --log-disable-ansi-codes true >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    wait_http "$ADMIN/health" 60
    wait_http "$INGRESS/restate/health" 60
}

# The admin SQL, rows as JSON ({"rows":[...]}).
sql() {
    curl -sS -f -X POST "$ADMIN/query" -H 'content-type: application/json' \
        -H 'accept: application/json' -d "$(jq -nc --arg q "$1" '{query: $q}')"
}

# An order as the bench sends it; the caller's unitPriceCents is 1 on purpose (the catalog's
# price must be charged).
order() { # id sku quantity paymentMethod postalCode
    jq -nc --arg id "$1" --arg sku "$2" --argjson qty "$3" --arg pm "$4" --arg zip "$5" '{
        orderId: $id, customerId: "cus_bench", currency: "EUR",
        shippingAddress: {name: "Ada", line1: "1 Way", city: "London", postalCode: $zip, country: "GB"},
        items: [{sku: $sku, quantity: $qty, unitPriceCents: 1}], paymentMethod: $pm}'
}

# POST /OrderSaga/<id>/run/send; prints "<http code> <status field>".
submit() { # id body
    local out code
    out="$(curl -sS -w '\n%{http_code}' -X POST "$INGRESS/OrderSaga/$1/run/send" \
        -H 'content-type: application/json' -d "$2" 2>/dev/null)" || { echo "000 -"; return 0; }
    code="${out##*$'\n'}"
    echo "$code $(jq -r '.status // "-"' <<<"${out%$'\n'*}" 2>/dev/null || echo -)"
}

call() { # path [body]: POST to the ingress, expects 2xx, prints the body
    if (($# > 1)); then
        curl -sS -f -X POST "$INGRESS/$1" -H 'content-type: application/json' -d "$2"
    else
        # A handler without input refuses a content-type (400), even with an empty body.
        curl -sS -f -X POST "$INGRESS/$1"
    fi
}

# Waits until the SQL's single value equals $2, at most $3 seconds.
wait_sql() { # query expected timeout what
    local deadline=$((SECONDS + $3)) got=""
    while :; do
        got="$(sql "$1" | jq -r '.rows[0] | to_entries[0].value' 2>/dev/null || true)"
        [[ "$got" == "$2" ]] && return 0
        ((SECONDS < deadline)) || fail "$4: expected $2, got ${got:-nothing}"
        sleep 0.3
    done
}

expect() { # what expected actual
    if [[ "$2" != "$3" ]]; then
        printf 'FAIL: %s\n--- expected\n%s\n--- got\n%s\n' "$1" "$2" "$3" >&2
        exit 1
    fi
    echo "ok: $1"
}

finished_runs() { # LIKE pattern of order ids
    echo "SELECT count(*) AS n FROM sys_invocation_status WHERE target_service_name = 'OrderSaga' AND target_handler_name = 'run' AND status = 'completed' AND target_service_key LIKE '$1'"
}

# ---------------------------------------------------------------------------------------------
echo "smoke: restate-server ingress $INGRESS, admin $ADMIN, node :$NODE_PORT, endpoint :$PEER_PORT, dir $WORK"
start_server
PORT="$PEER_PORT" APPROVAL_THRESHOLD_CENTS=100000 "$PEER" >>"$WORK/peer.log" 2>&1 &
PEER_PID=$!
deadline=$((SECONDS + 30))
until code="$(curl -sS -o "$WORK/register.json" -w '%{http_code}' -X POST "$ADMIN/deployments" \
    -H 'content-type: application/json' -d "{\"uri\":\"http://127.0.0.1:$PEER_PORT\"}" 2>/dev/null)" \
    && [[ "$code" == 201 ]]; do
    ((SECONDS < deadline)) || fail "registering the endpoint: HTTP ${code:-none}"
    sleep 0.3
done
expect "registered services" "OrderSaga Payments Sku" \
    "$(jq -r '[.services[].name] | sort | join(" ")' "$WORK/register.json")"

# --- 1. one order of each outcome --------------------------------------------------------------
call Sku/sku-a/restock '{"available":10,"priceCents":1500}' >/dev/null
call Sku/sku-b/restock '{"available":5,"priceCents":60000}' >/dev/null

answers=""
answers+="$(submit s-ok "$(order s-ok sku-a 1 pm_card_visa 'N1 9GU')")"$'\n'
answers+="$(submit s-declined "$(order s-declined sku-a 1 pm_card_chargeDeclined 'N1 9GU')")"$'\n'
answers+="$(submit s-zip "$(order s-zip sku-a 1 pm_card_visa 00000)")"$'\n'
answers+="$(submit s-approve "$(order s-approve sku-b 2 pm_card_visa 'N1 9GU')")"$'\n'
answers+="$(submit s-reject "$(order s-reject sku-b 2 pm_card_visa 'N1 9GU')")"$'\n'
# Two lines, the second out of stock: the first line's reservation must be given back.
oos="$(order s-oos sku-a 1 pm_card_visa 'N1 9GU' | jq -c '.items += [{sku: "sku-b", quantity: 10, unitPriceCents: 1}]')"
answers+="$(submit s-oos "$oos")"$'\n'
twice="$(order s-twice sku-a 1 pm_card_visa 'N1 9GU')"
answers+="$(submit s-twice "$twice")"$'\n'
answers+="$(submit s-twice "$twice")"$'\n'
answers+="$(submit s-twice "$twice")"
expect "submit answers (the last two: s-twice resubmitted)" "202 Accepted
202 Accepted
202 Accepted
202 Accepted
202 Accepted
202 Accepted
202 Accepted
202 PreviouslyAccepted
202 PreviouslyAccepted" "$answers"

wait_sql "$(finished_runs 's-%')" 5 30 "orders that do not wait for approval finished"
wait_sql "SELECT count(*) AS n FROM state WHERE service_name = 'OrderSaga' AND key = 'status' AND value_utf8 = '\"AWAITING_APPROVAL\"'" 2 30 "orders over the threshold waiting"
expect "status() of an order waiting" '{"status":"AWAITING_APPROVAL","reason":null}' \
    "$(call OrderSaga/s-approve/status)"
call OrderSaga/s-approve/approve '{"decision":"approve"}' >/dev/null
call OrderSaga/s-reject/approve '{"decision":"reject"}' >/dev/null
wait_sql "$(finished_runs 's-%')" 7 30 "all orders finished"
expect "status() of a cancelled order" '{"status":"CANCELLED","reason":"PAYMENT_DECLINED"}' \
    "$(call OrderSaga/s-declined/status)"

# The audit, from the state the peer keeps (one row per order: status, reason, total, charge,
# refunded, shipment).
ORDERS_SQL="SELECT service_key AS order_id,
  max(CASE WHEN service_name = 'OrderSaga' AND key = 'status' THEN json_get_str(value_utf8) END) AS status,
  max(CASE WHEN service_name = 'OrderSaga' AND key = 'reason' THEN json_get_str(value_utf8) END) AS reason,
  max(CASE WHEN service_name = 'OrderSaga' AND key = 'totalCents' THEN CAST(value_utf8 AS BIGINT) END) AS total_cents,
  max(CASE WHEN service_name = 'Payments' AND key = 'charge' THEN json_get_int(value_utf8, 'amountCents') END) AS charged_cents,
  bool_or(CASE WHEN service_name = 'Payments' AND key = 'charge' THEN json_get_bool(value_utf8, 'refunded') END) AS refunded,
  max(CASE WHEN service_name = 'OrderSaga' AND key = 'shipment' THEN json_get_str(value_utf8, 'shipmentId') END) AS shipment_id
FROM state WHERE service_name IN ('OrderSaga', 'Payments') GROUP BY service_key ORDER BY order_id"
expect "orders: status reason total charged refunded shipment" \
"s-approve COMPLETED - 120000 120000 false shp_s-approve
s-declined CANCELLED PAYMENT_DECLINED 1500 - - -
s-ok COMPLETED - 1500 1500 false shp_s-ok
s-oos CANCELLED OUT_OF_STOCK - - - -
s-reject CANCELLED REJECTED 120000 120000 true -
s-twice COMPLETED - 1500 1500 false shp_s-twice
s-zip CANCELLED SHIPMENT_REJECTED 1500 1500 true -" \
    "$(sql "$ORDERS_SQL" | jq -r '.rows[] | [.order_id, .status, .reason, .total_cents, .charged_cents, .refunded, .shipment_id] | map(if . == null then "-" else tostring end) | join(" ")')"

RESERVATIONS_SQL="SELECT substr(key, 3) AS order_id, service_key AS sku,
  json_get_int(value_utf8, 'quantity') AS quantity, json_get_bool(value_utf8, 'released') AS released
FROM state WHERE service_name = 'Sku' AND key LIKE 'r:%' ORDER BY order_id, sku"
expect "reservations: order sku quantity released" \
"s-approve sku-b 2 false
s-declined sku-a 1 true
s-ok sku-a 1 false
s-oos sku-a 1 true
s-reject sku-b 2 true
s-twice sku-a 1 false
s-zip sku-a 1 true" \
    "$(sql "$RESERVATIONS_SQL" | jq -r '.rows[] | "\(.order_id) \(.sku) \(.quantity) \(.released)"')"

SKUS_SQL="SELECT service_key AS sku,
  sum(CASE WHEN key = 'given' THEN CAST(value_utf8 AS BIGINT) ELSE 0 END) AS given,
  sum(CASE WHEN key = 'available' THEN CAST(value_utf8 AS BIGINT) ELSE 0 END) AS available,
  sum(CASE WHEN key LIKE 'r:%' AND NOT json_get_bool(value_utf8, 'released') THEN json_get_int(value_utf8, 'quantity') ELSE 0 END) AS held
FROM state WHERE service_name = 'Sku' GROUP BY service_key ORDER BY sku"
expect "SKUs: sku given available held" \
"sku-a 10 8 2
sku-b 5 3 2" \
    "$(sql "$SKUS_SQL" | jq -r '.rows[] | "\(.sku) \(.given) \(.available) \(.held)"')"

expect "s-twice: one run, one charge call" "1 1" \
    "$(sql "SELECT count(*) FILTER (WHERE target_service_name = 'OrderSaga') AS runs, count(*) FILTER (WHERE target_service_name = 'Payments' AND target_handler_name = 'charge') AS charges FROM sys_invocation_status WHERE target_service_key = 's-twice'" | jq -r '.rows[0] | "\(.runs) \(.charges)"')"

# --- 2. kill -9 restate-server in the middle of 200 orders -------------------------------------
N=200
call Sku/sku-c/restock "{\"available\":1000,\"priceCents\":100}" >/dev/null

# Submits orders c-<i>, 8 at a time; each is retried (connection refused or 5xx while the
# server is down or starting) until it is accepted, and recorded once accepted. An order whose
# submit was acknowledged is never submitted again: if the server lost it, it never finishes.
submit_until_accepted() { # i
    local id="c-$1" body answer
    body="$(order "$id" sku-c 1 pm_card_visa 'N1 9GU')"
    for _ in $(seq 1 600); do
        answer="$(submit "$id" "$body")"
        if [[ "$answer" == 202* ]]; then
            echo "$id $answer" >>"$WORK/accepted"
            return 0
        fi
        sleep 0.2
    done
    echo "$id never accepted" >>"$WORK/accepted"
}
export -f submit_until_accepted submit order
export INGRESS WORK
: >"$WORK/accepted"
started=$SECONDS
seq 1 "$N" | xargs -P 8 -I{} bash -c 'submit_until_accepted {}' &
SUBMITTER_PID=$!

# kill -9 once a third of the orders are accepted: sagas are then in every step.
deadline=$((SECONDS + 60))
until (($(wc -l <"$WORK/accepted") >= N / 3)); do
    ((SECONDS < deadline)) || fail "orders not accepted before the kill"
    sleep 0.05
done
finished_before_kill="$(sql "$(finished_runs 'c-%')" | jq -r '.rows[0].n')"
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
killed_at=$SECONDS
# No order can be accepted from here until the restart: this count is exact.
accepted_at_kill="$(wc -l <"$WORK/accepted")"
echo "smoke: kill -9 restate-server after $((killed_at - started)) s: $accepted_at_kill orders accepted, $finished_before_kill finished just before"
sleep 1
start_server
echo "smoke: restate-server restarted, serving again $((SECONDS - killed_at)) s after the kill"

wait "$SUBMITTER_PID" || true
SUBMITTER_PID=""
grep -q "never accepted" "$WORK/accepted" && fail "some orders were never accepted"
expect "orders accepted" "$N" "$(cut -d' ' -f1 "$WORK/accepted" | sort -u | wc -l | tr -d ' ')"
wait_sql "$(finished_runs 'c-%')" "$N" 180 "all $N orders finished after the restart"
echo "smoke: $N orders finished in $((SECONDS - started)) s (resubmits answered PreviouslyAccepted: $(grep -c PreviouslyAccepted "$WORK/accepted" || true))"

expect "the $N orders: status count" "COMPLETED $N" \
    "$(sql "SELECT json_get_str(value_utf8) AS status, count(*) AS n FROM state WHERE service_name = 'OrderSaga' AND key = 'status' AND service_key LIKE 'c-%' GROUP BY 1" | jq -r '.rows[] | "\(.status) \(.n)"')"
expect "the $N orders: charges, sum, refunded" "$N $((N * 100)) 0" \
    "$(sql "SELECT count(*) AS n, sum(json_get_int(value_utf8, 'amountCents')) AS cents, count(*) FILTER (WHERE json_get_bool(value_utf8, 'refunded')) AS refunded FROM state WHERE service_name = 'Payments' AND key = 'charge' AND service_key LIKE 'c-%'" | jq -r '.rows[0] | "\(.n) \(.cents) \(.refunded)"')"
expect "the $N orders: one run and one charge invocation each" "$N $N" \
    "$(sql "SELECT count(*) FILTER (WHERE target_service_name = 'OrderSaga') AS runs, count(*) FILTER (WHERE target_service_name = 'Payments') AS charges FROM sys_invocation_status WHERE target_service_key LIKE 'c-%'" | jq -r '.rows[0] | "\(.runs) \(.charges)"')"
expect "SKUs after the crash: sku given available held" \
"sku-a 10 8 2
sku-b 5 3 2
sku-c 1000 $((1000 - N)) $N" \
    "$(sql "$SKUS_SQL" | jq -r '.rows[] | "\(.sku) \(.given) \(.available) \(.held)"')"

FAILED=0
echo "smoke: all checks passed"
