// isofabric console: the audit log's checkpoint and an entry's inclusion, checked in the browser.
//
// For a chosen entry: (1) the latest checkpoint's C2SP signed note verifies with a published key
// of the name on its signature line; (2) the entry's leaf hash, recomputed from the entry shown
// (RFC 8785 canonical JSON, SHA-256(0x00 || leaf)), is the one the log stores; (3) the RFC 9162
// inclusion path the service gives (GET /v1/audit/proofs/inclusion's use case) leads from that
// leaf to the checkpoint's root hash. Same steps as `isofabric audit verify`, for one entry.
import {
  Steps,
  canonicalJson,
  equalBytes,
  fromBase64,
  hex,
  leafHash,
  noteKeyId,
  parseCheckpoint,
  rootFromInclusion,
  showOutcome,
  splitNote,
  usableKeys,
  utf8,
  verifyEd25519,
} from "./verify.js";

const data = JSON.parse(document.getElementById("audit-data").textContent);
const keys = usableKeys(data.keys);

function checkCheckpoint(steps) {
  const step = steps.add("checkpoint", "Checkpoint signature (C2SP signed note, Ed25519)");
  if (data.checkpoint === null) {
    step.fail("the service has no signed checkpoint");
    return null;
  }
  let note;
  try {
    note = splitNote(data.checkpoint.note);
  } catch (error) {
    step.fail(String(error.message));
    return null;
  }
  const text = utf8(note.text);
  for (const line of note.signatures) {
    const key = keys.find((k) => k.name === line.name && equalBytes(noteKeyId(k.name, k.raw), line.keyId));
    if (key && verifyEd25519(line.signature, text, key.raw)) {
      const checkpoint = parseCheckpoint(note.text);
      step.pass(`signed by ${key.name}+${hex(line.keyId)} (key id ${key.keyid}): ` +
        `${checkpoint.origin}, ${checkpoint.size} entries`);
      return checkpoint;
    }
  }
  step.fail("no signature line verifies with a published key");
  return null;
}

async function fetchInclusion(index, size) {
  const answer = await fetch(`/ui/audit-log/inclusion?index=${index}&size=${size}`, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  if (!answer.ok) throw new Error(`the service answered ${answer.status}`);
  return answer.json();
}

async function checkInclusion(index, list, outcome) {
  const steps = new Steps(list);
  outcome.hidden = true;
  try {
    const checkpoint = checkCheckpoint(steps);
    const entry = data.entries.find((e) => e.index === index);
    if (checkpoint !== null) {
      const leafStep = steps.add("leaf", `Leaf hash of entry ${index}`);
      const proof = await fetchInclusion(index, checkpoint.size);
      const leaf = leafHash(utf8(canonicalJson(entry)));
      if (!equalBytes(leaf, fromBase64(proof.leaf_hash))) {
        leafStep.fail(`SHA-256(0x00 || entry) is ${hex(leaf)}, the log stores ${hex(fromBase64(proof.leaf_hash))}`);
      } else {
        leafStep.pass(`${hex(leaf)} (recomputed from the entry shown)`);
        const pathStep = steps.add("inclusion", "Inclusion path to the checkpoint's root");
        const path = proof.path.map(fromBase64);
        const root = rootFromInclusion(index, checkpoint.size, leaf, path);
        if (root !== null && equalBytes(root, checkpoint.root)) {
          pathStep.pass(`${path.length} hash(es) lead to root ${hex(root)} of the ${checkpoint.size}-entry tree`);
        } else {
          pathStep.fail(`the path does not lead to the checkpoint's root ${hex(checkpoint.root)}`);
        }
      }
    }
  } catch (error) {
    steps.add("error", "Check").fail(String(error.message ?? error));
  }
  showOutcome(outcome, steps, `entry ${index} is in the signed log`);
}

function wire() {
  const panel = document.getElementById("inclusion-panel");
  const list = document.getElementById("verify-steps");
  const outcome = document.getElementById("verify-outcome");
  const title = document.getElementById("inclusion-title");
  for (const button of document.querySelectorAll("button[data-check-index]")) {
    button.addEventListener("click", async () => {
      const index = Number(button.dataset.checkIndex);
      panel.hidden = false;
      title.textContent = `Entry ${index}`;
      button.disabled = true;
      try {
        await checkInclusion(index, list, outcome);
      } finally {
        button.disabled = false;
      }
    });
    button.disabled = false;
  }
  document.body.dataset.auditReady = "true";
}

wire();
