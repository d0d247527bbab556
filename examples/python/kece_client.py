#!/usr/bin/env python3
"""A small KECE business-API client in Python, standard library only.

It does what a business backend does (docs/business.md):

  upload test data   PUT  /api/v1/artifacts/{sha256}
  publish a manifest POST /api/v1/manifests
  enqueue            POST /api/v1/submissions   (with an Idempotency-Key)
  read status        GET  /api/v1/submissions/{type}/{id}?waitMs=…
  consume events     POST /api/v1/settlement-events/claim, then /ack

and verifies settlement webhooks signed per the Standard Webhooks
specification (verify_webhook).

Run the whole flow against a control plane with a business token:

  python3 kece_client.py --url http://127.0.0.1:8080 --token-file biz.token quickstart

It prints one JSON object per step and exits 0 when the submission got a
verdict and its settlement event was consumed, 1 otherwise.

Verify one webhook delivery (body on stdin), exit 0 when valid:

  python3 kece_client.py verify-webhook --secret whsec_... \\
      --id 301 --timestamp 1764500000 --signature 'v1,...' < body.json
"""

import argparse
import base64
import hashlib
import hmac
import json
import random
import sys
import time
import urllib.error
import urllib.request
import uuid


class KeceError(Exception):
    """An API refusal: HTTP status plus the machine-readable code."""

    def __init__(self, status, code, message, retry_after=0):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.retry_after = retry_after


class KeceClient:
    """Business API client. token is a business token (kbt_...)."""

    def __init__(self, base_url, token, timeout=30, max_rate_limit_waits=10):
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_rate_limit_waits = max_rate_limit_waits

    def _call(self, method, path, body=None, raw=None, headers=None):
        """One API call. Over the token's request budget the control plane
        answers 429 RATE_LIMITED with Retry-After before doing anything, so
        the same call is sent again after that long (with jitter)."""
        for waits in range(self.max_rate_limit_waits + 1):
            try:
                return self._call_once(method, path, body, raw, headers)
            except KeceError as e:
                if e.status != 429 or waits == self.max_rate_limit_waits:
                    raise
                wait = max(e.retry_after, 1) + random.uniform(0, 0.5)
                print(json.dumps({"step": "rate_limited", "code": e.code, "path": path, "waitSeconds": round(wait, 2)}),
                      file=sys.stderr)
                time.sleep(wait)

    def _call_once(self, method, path, body, raw, headers):
        data, hdrs = None, {"Authorization": "Bearer " + self.token}
        if raw is not None:
            data = raw
            hdrs["Content-Type"] = "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                payload = resp.read()
                return resp.status, (json.loads(payload) if payload else None)
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())
            except ValueError:
                err = {}
            try:
                retry_after = int(e.headers.get("Retry-After", "0"))
            except ValueError:
                retry_after = 0
            raise KeceError(e.code, err.get("code", "HTTP_%d" % e.code), err.get("message", e.reason), retry_after) from None

    def upload_artifact(self, content):
        """Stores bytes by SHA-256 (idempotent); returns (sha256, size)."""
        digest = hashlib.sha256(content).hexdigest()
        self._call("PUT", "/api/v1/artifacts/" + digest, raw=content)
        return digest, len(content)

    def publish_manifest(self, manifest):
        """Publishes an immutable manifest; returns its manifestId."""
        _, body = self._call("POST", "/api/v1/manifests", body=manifest)
        return body["manifestId"]

    def enqueue(self, submission_type, submission_id, language, source, manifest_id, idempotency_key=None):
        """Enqueues a submission. A retry with the same key and body gets the same job."""
        key = idempotency_key or str(uuid.uuid4())
        _, body = self._call("POST", "/api/v1/submissions", headers={"Idempotency-Key": key}, body={
            "submissionType": submission_type, "submissionId": submission_id,
            "language": language, "source": source, "manifestId": manifest_id})
        return body

    def status(self, submission_type, submission_id, wait_ms=0):
        """Current status; with wait_ms the server answers as soon as the
        submission settles, or with the status as it is when the wait ends."""
        query = "?waitMs=%d" % wait_ms if wait_ms else ""
        _, body = self._call("GET", "/api/v1/submissions/%s/%s%s" % (submission_type, submission_id, query))
        return body

    def wait_for_verdict(self, submission_type, submission_id, timeout=120):
        """Waiting reads (no polling) until the status is no longer
        PENDING/COMPILING/JUDGING."""
        deadline = time.monotonic() + timeout
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            st = self.status(submission_type, submission_id, wait_ms=max(1, min(30000, left_ms)))
            if st["status"] not in ("PENDING", "COMPILING", "JUDGING"):
                return st
            if time.monotonic() > deadline:
                raise TimeoutError("no verdict for %s/%s after %ss (last: %s)" % (submission_type, submission_id, timeout, st["status"]))

    def claim_events(self, consumer, max_events=50, lease_ms=60000):
        _, body = self._call("POST", "/api/v1/settlement-events/claim",
                             body={"consumer": consumer, "max": max_events, "leaseMs": lease_ms})
        return body["events"]

    def ack_events(self, consumer, event_ids):
        _, body = self._call("POST", "/api/v1/settlement-events/ack",
                             body={"consumer": consumer, "eventIds": list(event_ids)})
        return body


def verify_webhook(secret, msg_id, timestamp, signature_header, body, tolerance=300, now=None):
    """Standard Webhooks verification: True when one v1 signature matches.

    secret is "whsec_<base64>"; body the raw bytes exactly as received; the
    three values are the webhook-id, webhook-timestamp and webhook-signature
    headers. A timestamp more than tolerance seconds from now is refused
    (replays).
    """
    key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
    now = time.time() if now is None else now
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(now - ts) > tolerance:
        return False
    mac = hmac.new(key, ("%s.%s." % (msg_id, timestamp)).encode() + body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(mac).decode()
    return any(hmac.compare_digest(expected, sig) for sig in signature_header.split(" "))


def quickstart(client, submission_type, submission_id, consumer, timeout):
    """a+b end to end: test data, manifest, enqueue, verdict, settlement event."""
    def step(name, **fields):
        print(json.dumps(dict(step=name, **fields)), flush=True)

    cases = []
    for case_id, (inp, out, weight) in enumerate([(b"1 2\n", b"3\n", 40), (b"20 22\n", b"42\n", 60)], start=1):
        in_sha, in_size = client.upload_artifact(inp)
        out_sha, out_size = client.upload_artifact(out)
        cases.append({"caseId": str(case_id), "inputSha256": in_sha, "inputSize": in_size,
                      "outputSha256": out_sha, "outputSize": out_size, "weight": weight})
    step("artifacts", count=len(cases) * 2)
    # Two subtasks: "small" is all or nothing (min); "large" is judged only
    # when "small" is AC. The verdict reports each subtask's score.
    subtasks = [{"subtaskId": "small", "scoring": "min", "cases": ["1"]},
                {"subtaskId": "large", "scoring": "sum", "cases": ["2"], "dependsOn": ["small"]}]
    manifest_id = client.publish_manifest({"kind": "CODE", "limits": {"timeMs": 1000, "memoryMb": 256, "outputKb": 64},
                                           "checker": {"type": "tolerant"}, "cases": cases, "subtasks": subtasks})
    step("manifest", manifestId=manifest_id)
    source = "a, b = map(int, input().split())\nprint(a + b)\n"
    key = "quickstart-%s-%s" % (submission_type, submission_id)
    accepted = client.enqueue(submission_type, submission_id, "python3", source, manifest_id, idempotency_key=key)
    again = client.enqueue(submission_type, submission_id, "python3", source, manifest_id, idempotency_key=key)
    if again["jobId"] != accepted["jobId"]:
        step("error", message="a retried enqueue made a second job")
        return 1
    step("enqueued", jobId=accepted["jobId"], status=accepted["status"])
    final = client.wait_for_verdict(submission_type, submission_id, timeout=timeout)
    verdict = final.get("verdict") or {}
    step("status", status=final["status"], score=verdict.get("score"), maxScore=verdict.get("maxScore"),
         subtasks={s["subtaskId"]: "%s %s/%s" % (s["status"], s["score"], s["maxScore"]) for s in verdict.get("subtasks") or []})

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = client.claim_events(consumer, lease_ms=30000)
        mine = [e for e in events if e["jobId"] == accepted["jobId"]]
        # A real consumer applies every event idempotently (keyed by eventId,
        # ignoring older generations) in its database, then acknowledges it.
        # This example takes only its own; the others come back to their
        # consumers when the lease ends.
        if mine:
            client.ack_events(consumer, [e["eventId"] for e in mine])
            step("event", eventId=mine[0]["eventId"], status=mine[0]["payload"]["status"])
            return 0 if mine[0]["payload"]["status"] == final["status"] else 1
        time.sleep(0.2)
    step("error", message="no settlement event for job %s" % accepted["jobId"])
    return 1


def main(argv=None):
    p = argparse.ArgumentParser(description="KECE business API example client")
    p.add_argument("--url", default="http://127.0.0.1:8080", help="control plane base URL")
    p.add_argument("--token-file", help="file holding a business token (kbt_...)")
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quickstart", help="a+b from test data to settlement event")
    q.add_argument("--type", default="ALGO")
    q.add_argument("--id", default="py-" + uuid.uuid4().hex[:12])
    q.add_argument("--consumer", default="python-example")
    q.add_argument("--timeout", type=float, default=120)
    v = sub.add_parser("verify-webhook", help="verify one delivery; body on stdin")
    v.add_argument("--secret", required=True)
    v.add_argument("--id", required=True)
    v.add_argument("--timestamp", required=True)
    v.add_argument("--signature", required=True)
    args = p.parse_args(argv)

    if args.cmd == "verify-webhook":
        ok = verify_webhook(args.secret, args.id, args.timestamp, args.signature, sys.stdin.buffer.read())
        print("valid" if ok else "invalid")
        return 0 if ok else 1
    if not args.token_file:
        p.error("--token-file is required for quickstart")
    with open(args.token_file) as f:
        client = KeceClient(args.url, f.read().strip())
    try:
        return quickstart(client, args.type, args.id, args.consumer, args.timeout)
    except KeceError as e:
        print(json.dumps({"step": "error", "status": e.status, "code": e.code, "message": e.message}), flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
