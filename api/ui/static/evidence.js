// isofabric console: "Verify in the browser" for an isolation proof (a DSSE envelope).
//
// The steps are those of `isofabric proof verify` (cli/proofs.py) up to the subjects:
// the envelope's form, the signing key among the service's published keys (/v1/keys), the
// Ed25519 signature over the DSSE PAE, the in-toto Statement, then each subject artifact fetched
// from this origin (the files of the proof's snapshot) and hashed with SHA-256. The claims'
// re-derivation from the artifacts stays with `isofabric proof verify --artifacts`.
// Only bytes that hash to another digest fail a subject. One the service cannot give (410: the
// snapshot's files are no longer retained; another status, or no answer) is unavailable: the
// outcome says to verify offline, since nothing was found altered.
// Used by the proof page (the stored envelope) and the verify page (an envelope pasted in).
import {
  Steps,
  equalBytes,
  fromBase64,
  hex,
  keyId,
  pae,
  sha256,
  showOutcome,
  usableKeys,
  verifyEd25519,
} from "./verify.js";

const PAYLOAD_TYPE = "application/vnd.in-toto+json";
const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
const PREDICATE_TYPE = "https://isofabric.dev/isolation-proof/v1";

const NOT_RETAINED = "evidence no longer retained: verify offline";
const NOT_FETCHED = "evidence not available: verify offline";
const OFFLINE = "verify offline (isofabric proof verify --artifacts, on the files the proof names)";

const data = JSON.parse(document.getElementById("evidence-data").textContent);
const keys = usableKeys(data.keys);

function checkEnvelope(steps, envelope) {
  const step = steps.add("envelope", "DSSE envelope");
  if (envelope === null || typeof envelope !== "object") return step.fail("not a JSON object");
  if (envelope.payloadType !== PAYLOAD_TYPE) {
    return step.fail(`payloadType is not ${PAYLOAD_TYPE}`);
  }
  try {
    envelope.body = fromBase64(envelope.payload);
  } catch {
    return step.fail("the payload is not valid base64");
  }
  if (!Array.isArray(envelope.signatures) || envelope.signatures.length === 0) {
    return step.fail("the envelope has no signatures");
  }
  return step.pass(`${envelope.body.length} payload bytes, ${envelope.signatures.length} signature(s)`);
}

function checkSignature(steps, envelope) {
  const keyStep = steps.add("key", "Signing key");
  const named = envelope.signatures.map((s) => keys.find((k) => k.keyid === s.keyid));
  const known = named.filter(Boolean);
  if (known.length === 0) {
    const ids = envelope.signatures.map((s) => s.keyid).join(", ");
    return keyStep.fail(`no published key has key id ${ids}`);
  }
  keyStep.pass(known.map((k) => `${k.name} (${k.status}), key id ${k.keyid}`).join("; "));
  const step = steps.add("signature", "Ed25519 signature over the DSSE PAE");
  const message = pae(envelope.payloadType, envelope.body);
  for (const [i, signature] of envelope.signatures.entries()) {
    let sig;
    try {
      sig = fromBase64(signature.sig);
    } catch {
      continue;
    }
    // The keyid is only a hint: every published key is tried, as the CLI does.
    const key = keys.find((k) => verifyEd25519(sig, message, k.raw));
    if (key) {
      step.pass(`signature ${i + 1} verifies with key id ${keyId(key.raw)}`);
      return key;
    }
  }
  step.fail("no signature verifies with a published key: the payload or signature was altered");
  return null;
}

// A retired key verifies only what it signed while active: a proof it signed after its
// retirement was signed by whoever kept the key (docs/auditors.md, "Keys").
function checkInOffice(steps, signer, predicate) {
  if (!signer.retired_at) return true;
  const step = steps.add("retired", "Signed while the key was active");
  const signed = Date.parse(predicate.time);
  if (!(signed <= Date.parse(signer.retired_at))) {
    return step.fail(`issued ${predicate.time}, after ${signer.name} retired (${signer.retired_at})`);
  }
  return step.pass(`issued ${predicate.time}, before ${signer.name} retired (${signer.retired_at})`);
}

function checkStatement(steps, envelope) {
  const step = steps.add("statement", "in-toto Statement");
  let statement;
  try {
    statement = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(envelope.body));
  } catch {
    step.fail("the payload is not JSON");
    return null;
  }
  const ok =
    statement?._type === STATEMENT_TYPE &&
    statement.predicateType === PREDICATE_TYPE &&
    statement.predicate && typeof statement.predicate === "object" &&
    Array.isArray(statement.subject) && statement.subject.length > 0;
  if (!ok) {
    step.fail(`not an in-toto Statement v1 with predicate ${PREDICATE_TYPE} and subjects`);
    return null;
  }
  const p = statement.predicate;
  step.pass(`tenant ${p.tenant} on fabric ${p.fabric} (${p.view ?? "full"} view), issued ${p.time}`);
  return statement;
}

function artifactUrl(predicate, name) {
  const path = name.split("/").map(encodeURIComponent).join("/");
  const fabric = encodeURIComponent(predicate.fabric);
  const digest = encodeURIComponent(predicate.snapshot_digest);
  return `/ui/evidence/fabrics/${fabric}/snapshots/${digest}/artifacts/${path}`;
}

// The subject's bytes ({bytes}), or the status that answered instead ({status}; 0: no answer).
async function fetchSubject(predicate, name) {
  try {
    const answer = await fetch(artifactUrl(predicate, name), { credentials: "same-origin" });
    if (!answer.ok) return { status: answer.status };
    return { bytes: new Uint8Array(await answer.arrayBuffer()) };
  } catch {
    return { status: 0 };
  }
}

function unfetched(status) {
  if (status === 410) return `not checked: the service no longer retains this snapshot's files (410); ${OFFLINE}`;
  const why = status === 0 ? "the service could not be reached" : `the service answered ${status}`;
  return `not checked: ${why}; ${OFFLINE}`;
}

// Check one subject; returns the status that kept its bytes from being fetched, else null.
async function checkSubject(steps, predicate, subject) {
  const step = steps.add(`artifact:${subject.name}`, `Artifact ${subject.name}`);
  if (!data.artifacts) {
    step.skip(data.artifacts_reason);
    return null;
  }
  const { bytes, status } = await fetchSubject(predicate, subject.name);
  if (bytes === undefined) {
    step.unavailable(unfetched(status));
    return status;
  }
  const actual = hex(sha256(bytes));
  const expected = subject.digest?.sha256;
  if (actual === expected) step.pass(`sha256 ${actual}`);
  else step.fail(`sha256 ${actual} is not the proof's ${expected}`);
  return null;
}

export async function verifyProof(envelope, list, outcome) {
  const steps = new Steps(list);
  const missing = [];
  outcome.hidden = true;
  try {
    const signer = checkEnvelope(steps, envelope) ? checkSignature(steps, envelope) : null;
    const statement = signer ? checkStatement(steps, envelope) : null;
    if (statement && checkInOffice(steps, signer, statement.predicate)) {
      for (const subject of statement.subject) {
        missing.push(await checkSubject(steps, statement.predicate, subject));
      }
    }
  } catch (error) {
    steps.add("error", "Check").fail(String(error));
  }
  const passed = data.artifacts ? "verified: signature and artifact digests" : "verified: signature";
  showOutcome(outcome, steps, passed, missing.includes(410) ? NOT_RETAINED : NOT_FETCHED);
  return steps.failed === null;
}

function pastedEnvelope(text) {
  const parsed = JSON.parse(text);
  // A proof as POST /v1/.../isolation-proofs answers it ({"id", "view", "envelope"}) or a bare
  // envelope, as `isofabric proof verify` accepts.
  return parsed && typeof parsed === "object" && "envelope" in parsed ? parsed.envelope : parsed;
}

function wire() {
  const button = document.getElementById("verify-button");
  const list = document.getElementById("verify-steps");
  const outcome = document.getElementById("verify-outcome");
  if (!button) return;
  const pasted = document.getElementById("envelope-text");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      let envelope = data.envelope;
      if (pasted) {
        try {
          envelope = pastedEnvelope(pasted.value);
        } catch {
          envelope = null;
        }
      }
      await verifyProof(envelope, list, outcome);
    } finally {
      button.disabled = false;
    }
  });
  button.disabled = false;
  button.dataset.ready = "true";
}

wire();
