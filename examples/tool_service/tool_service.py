#!/usr/bin/env python3
"""An example tool service for turnstile's example domain (config/agents.example.yaml).

It answers the worker's tool webhooks for the five example tools, with made-up data, so that the
quick start (scripts/run.sh) can confirm, pre-validate and execute end to end. Copy it as the
starting point of your own service: replace the functions in the "Your domain" section with calls
to your systems, keep the protocol part.

The webhook contract (the "Tool webhooks" comment of config/agents.example.yaml):

    POST /tools/<tool>                 execution;      body {"action": "execute", ...}
    POST /tools/<tool>/pre-validate    pre-validation; body {"action": "pre_validate", ...}

    body:    {"action", "tool", "arguments": {...}, "transaction_id",
              "identity": {"tenant_id", "agent_id", "session_id"}}
    headers: Idempotency-Key      the same on every retry and restart of one call
             X-Turnstile-Turn-Id  the turn that caused the call (for your logs)

    execution       2xx + JSON result = done. 4xx {"error": text, "code": text} = failed for good.
                    408, 429, 5xx = the worker retries with the same key.
    pre-validation  2xx {"eligible": bool, "reason": text, "code": text, "data": any}. Anything
                    else and the worker treats the transaction as NOT eligible (it fails closed).

    The customer reads a refusal's `code` through the tool's `reasons` texts in their language;
    the `reason` / `error` text itself only when the conversation is in the tool's
    `service_locale` (English here) and the code has no text (RP-2). Codes of this service:
    already_shipped, already_cancelled.

Debugging aids (not part of the contract): GET /health -> {"status": "ok"};
GET /executions -> how often each Idempotency-Key executed and was answered from the store.

Run:  python3 examples/tool_service/tool_service.py [--host 127.0.0.1] [--port 8081]
Python 3.8+, standard library only.
"""

import argparse
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY_BYTES = 1024 * 1024  # a webhook body is a few hundred bytes; refuse anything absurd


class ToolError(Exception):
    """A decided failure: the worker ends the transaction FAILED; the customer reads the tool's
    text for `code` (or `message` in a conversation in English)."""

    def __init__(self, status, message, code=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


# ---- Your domain ---------------------------------------------------------------------------------
# Made-up orders and bills. Order PED-9999 has already shipped: it cannot be cancelled and its
# address cannot change. Every other PED-<digits> order is "processing" until cancelled here.
SHIPPED_ORDERS = {"PED-9999"}
CANCELLED_ORDERS = set()  # orders this process cancelled (a real service asks its database)


def short_id(prefix, key):
    """A stable id derived from the idempotency key: the same call always gets the same id."""
    return prefix + "-" + hashlib.sha256(key.encode()).hexdigest()[:8].upper()


def order_status(order_id):
    if order_id in CANCELLED_ORDERS:
        return "cancelled"
    if order_id in SHIPPED_ORDERS:
        return "shipped"
    return "processing"


def pre_validate_order_cancel(args, call):
    order_id = args["order_id"]
    status = order_status(order_id)
    if status == "shipped":
        return {"eligible": False, "reason": "order %s has already shipped" % order_id,
                "code": "already_shipped", "data": {"order_id": order_id, "status": status}}
    if status == "cancelled":
        return {"eligible": False, "reason": "order %s is already cancelled" % order_id,
                "code": "already_cancelled", "data": {"order_id": order_id, "status": status}}
    return {"eligible": True, "reason": "order %s can be cancelled" % order_id,
            "data": {"order_id": order_id, "status": status}}


def order_cancel(args, call):
    order_id = args["order_id"]
    # Check again at execution: the order may have shipped since the pre-validation.
    verdict = pre_validate_order_cancel(args, call)
    if not verdict["eligible"]:
        raise ToolError(409, verdict["reason"], verdict["code"])
    CANCELLED_ORDERS.add(order_id)
    return {"order_id": order_id, "status": "cancelled",
            "cancellation_id": short_id("CAN", call["key"]), "refund": "full, within 5 business days"}


def order_tracking(args, call):
    order_id = args["order_id"]
    status = order_status(order_id)
    result = {"order_id": order_id, "status": status}
    if status == "shipped":
        result.update({"carrier": "Correios", "tracking_code": "BR" + order_id[4:] + "XX",
                       "estimated_delivery": "2 business days"})
    elif status == "processing":
        result["estimated_shipping"] = "1 business day"
    return result


def address_change(args, call):
    order_id = args["order_id"]
    status = order_status(order_id)
    if status != "processing":
        code = "already_shipped" if status == "shipped" else "already_cancelled"
        raise ToolError(409, "order %s is %s; its address can no longer change" % (order_id, status),
                        code)
    return {"order_id": order_id, "status": "address_updated",
            "address": {"zip_code": args["zip_code"], "house_number": args["house_number"]}}


def contestation(args, call):
    return {"contestation_id": short_id("CT", call["key"]), "status": "opened",
            "subject": args["subject"], "amount": args["amount"],
            "answer_within": "10 business days"}


def show_bill(args, call):
    tenant = call["identity"].get("tenant_id", "")
    return {"account": tenant, "amount": "R$ 120.00", "due_date": "2026-01-10", "status": "open"}


# tool -> required arguments, execution, pre-validation (None: the tool has none configured)
TOOLS = {
    "retail_order_cancel": (["order_id"], order_cancel, pre_validate_order_cancel),
    "retail_order_tracking": (["order_id"], order_tracking, None),
    "retail_address_change": (["order_id", "zip_code", "house_number"], address_change, None),
    "billing_contestation": (["subject", "amount"], contestation, None),
    "billing_show_bill": ([], show_bill, None),
}


# ---- Idempotency ---------------------------------------------------------------------------------
# The first decided answer (2xx or 4xx) of an Idempotency-Key is stored and returned again for the
# same key without executing again: the worker repeats a call after a timeout, a crash or a
# redelivery, and the customer must not get two cancellations. A 5xx decides nothing, so it is not
# stored. In memory only: a real service must store the key and the answer in its database, in the
# same transaction as the effect, or a restart forgets them and executes again.
class IdempotencyStore:
    def __init__(self):
        self._lock = threading.Lock()  # one execution at a time: simple, and enough for an example
        self._answers = {}             # key -> (fingerprint, status, body)
        self._counts = {}              # key -> {"tool", "executions", "replays"}

    def execute(self, key, fingerprint, tool, run):
        """`run()` -> (status, body), called at most once per key. Returns (status, body, replayed)."""
        with self._lock:
            stored = self._answers.get(key)
            if stored is not None:
                if stored[0] != fingerprint:
                    return 422, {"error": "Idempotency-Key %s was already used for a different "
                                          "call; send a new key for a new call" % key}, False
                self._counts[key]["replays"] += 1
                return stored[1], stored[2], True
            status, body = run()
            count = self._counts.setdefault(key, {"tool": tool, "executions": 0, "replays": 0})
            count["executions"] += 1
            if status < 500:
                self._answers[key] = (fingerprint, status, body)
            return status, body, False

    def counts(self):
        with self._lock:
            return json.loads(json.dumps(self._counts))


STORE = IdempotencyStore()


# ---- The protocol --------------------------------------------------------------------------------
def route(path):
    """'/tools/<tool>' -> (tool, 'execute'); '/tools/<tool>/pre-validate' -> (tool, 'pre_validate')."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if len(parts) == 2 and parts[0] == "tools":
        return parts[1], "execute"
    if len(parts) == 3 and parts[0] == "tools" and parts[2] == "pre-validate":
        return parts[1], "pre_validate"
    return None, None


def handle_call(tool, action, body, key, turn_id):
    """One webhook call -> (status, JSON body, replayed: answered from the idempotency store)."""

    def refuse(status, message):
        return status, {"error": message}, False

    if not isinstance(body, dict):
        return refuse(400, "the body must be a JSON object")
    if body.get("action", action) != action:
        return refuse(400, "body action %r does not match the path (expected %r)" % (body.get("action"), action))
    if body.get("tool", tool) != tool:
        return refuse(400, "body tool %r does not match the path (expected %r)" % (body.get("tool"), tool))
    args = body.get("arguments") or {}
    if not isinstance(args, dict):
        return refuse(400, "arguments must be a JSON object")
    required, execute, pre_validate = TOOLS[tool]
    missing = [name for name in required if args.get(name) in (None, "")]
    if missing:
        return refuse(400, "missing argument(s): " + ", ".join(missing))
    identity = body.get("identity") if isinstance(body.get("identity"), dict) else {}
    call = {"key": key, "turn_id": turn_id, "identity": identity,
            "transaction_id": body.get("transaction_id")}

    if action == "pre_validate":
        if pre_validate is None:
            return refuse(404, "tool %s has no pre-validation" % tool)
        return 200, pre_validate(args, call), False  # read-only: no idempotency needed

    if not key:
        return refuse(400, "missing Idempotency-Key header")

    def run():
        try:
            return 200, execute(args, call)
        except ToolError as e:
            body = {"error": e.message}
            if e.code:
                body["code"] = e.code
            return e.status, body
        except Exception as e:  # a bug or a backend outage: retryable, nothing stored
            return 500, {"error": "internal error: %s" % e}

    fingerprint = json.dumps([tool, args], sort_keys=True)
    return STORE.execute(key, fingerprint, tool, run)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the worker pools its connections
    server_version = "turnstile-example-tools/1"

    def do_POST(self):
        started = time.monotonic()
        key = self.headers.get("Idempotency-Key", "")
        turn_id = self.headers.get("X-Turnstile-Turn-Id", "")

        def answer(status, body, replayed=False):
            self.reply(status, body, started, "key=%s turn=%s" % (key or "-", turn_id or "-"), replayed)

        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True  # the body was not read: the connection is out of step
            if length > MAX_BODY_BYTES:
                return answer(413, {"error": "body larger than %d bytes" % MAX_BODY_BYTES})
            return answer(411, {"error": "send the body with a Content-Length header"})
        raw = self.rfile.read(length)  # read it even for a 404: keep-alive needs the stream in step
        tool, action = route(self.path)
        if tool is None:
            return answer(404, {"error": "no such endpoint: POST %s (expected /tools/<tool> or "
                                         "/tools/<tool>/pre-validate)" % self.path})
        if tool not in TOOLS:
            return answer(404, {"error": "unknown tool %r; this service has: %s" % (tool, ", ".join(sorted(TOOLS)))})
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            return answer(400, {"error": "body is not valid JSON: %s" % e})
        answer(*handle_call(tool, action, body, key, turn_id))

    def do_GET(self):
        started = time.monotonic()
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self.reply(200, {"status": "ok"}, started)
        if path == "/executions":
            return self.reply(200, {"executions": STORE.counts()}, started)
        if route(path)[0] is not None:
            return self.reply(405, {"error": "tool webhooks take POST"}, started)
        self.reply(404, {"error": "no such endpoint: GET %s (GET serves /health and /executions)" % path}, started)

    def reply(self, status, body, started, note="", replayed=False):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        # one line per request, once the answer went out
        took_ms = (time.monotonic() - started) * 1000
        line = "%s %s %s %d %.1fms %s%s" % (time.strftime("%Y-%m-%dT%H:%M:%S"), self.command, self.path,
                                            status, took_ms, note, " (replayed: stored answer)" if replayed else "")
        sys.stderr.write(line.rstrip() + "\n")
        sys.stderr.flush()

    def log_request(self, code="-", size="-"):
        pass  # reply() logs every answered request, with its key

    def log_message(self, fmt, *args):  # the base class's own errors (malformed request lines)
        sys.stderr.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), fmt % args))


def main():
    parser = argparse.ArgumentParser(description="Example tool service for turnstile's example domain.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8081, help="port to listen on (default 8081)")
    opts = parser.parse_args()
    try:
        server = ThreadingHTTPServer((opts.host, opts.port), Handler)
    except OSError as e:
        sys.exit("tool_service: cannot listen on %s:%d: %s (is another tool service running? "
                 "pick another port with --port)" % (opts.host, opts.port, e))
    server.daemon_threads = True
    sys.stderr.write("tool_service: listening on http://%s:%d (tools: %s)\n"
                     % (opts.host, server.server_address[1], ", ".join(sorted(TOOLS))))
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
