// isofabric console: the cryptography of the evidence pages, checked in the browser.
//
// Pure JavaScript on the vendored @noble/ed25519 and @noble/hashes (static/vendor/VERSIONS):
// WebCrypto's crypto.subtle exists only in secure contexts (HTTPS or loopback) and `serve`
// speaks plain HTTP on a management network, so nothing here touches crypto.subtle.
// The formats follow the server's code, byte for byte:
// - DSSE: Ed25519 over PAE = "DSSEv1 <len> <payloadType> <len> <payload>" (policies/evidence/dsse.py)
// - key id: lowercase hex SHA-256 of the raw 32-byte Ed25519 public key (same module)
// - RFC 9162 Merkle trees: leaf SHA-256(0x00 || leaf), node SHA-256(0x01 || left || right);
//   an audit entry's leaf is its RFC 8785 canonical JSON (policies/evidence/merkle.py)
// - C2SP signed notes: Ed25519 over the note text; key ID SHA-256(name || 0x0A || 0x01 || key)[:4]
//   (policies/evidence/signed_note.py)
import * as ed from "./vendor/noble-ed25519/index.js";
import { sha256, sha512 } from "./vendor/noble-hashes/sha2.js";

ed.hashes.sha512 = sha512; // the synchronous path: verifyAsync would use crypto.subtle

const encoder = new TextEncoder();
export const utf8 = (text) => encoder.encode(text);
export { sha256 };

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

export const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export function equalBytes(a, b) {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

// Standard base64 with padding, refusing anything else (as Python's b64decode(validate=True)).
export function fromBase64(text) {
  if (typeof text !== "string" || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw new Error("not valid base64");
  }
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

// base64url without padding (RFC 8037 JWK "x").
export function fromBase64Url(text) {
  const plain = text.replace(/-/g, "+").replace(/_/g, "/");
  return fromBase64(plain + "=".repeat((4 - (plain.length % 4)) % 4));
}

export function pae(payloadType, body) {
  const kind = utf8(payloadType);
  return concat(utf8(`DSSEv1 ${kind.length} `), kind, utf8(` ${body.length} `), body);
}

// Ed25519 as RFC 8032 (not ZIP-215), like the server's `cryptography` library.
export function verifyEd25519(signature, message, publicKey) {
  try {
    return ed.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false; // a malformed key or signature verifies nothing
  }
}

export const keyId = (rawPublicKey) => hex(sha256(rawPublicKey));

// RFC 8785 canonical JSON: keys sorted by UTF-16 code units, ECMAScript number and string
// serialisation (the RFC is defined in terms of JSON.stringify), no whitespace.
export function canonicalJson(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(canonicalJson).join(",")}]`;
  }
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
}

export const leafHash = (data) => sha256(concat(Uint8Array.of(0), data));
export const nodeHash = (left, right) => sha256(concat(Uint8Array.of(1), left, right));

// RFC 9162 §2.1.3.2: the root an inclusion path leads to, or null when the path cannot be
// one of leaf `index` in a tree of `size` leaves.
export function rootFromInclusion(index, size, leaf, path) {
  if (!(index >= 0 && index < size)) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

export const noteKeyId = (name, rawPublicKey) =>
  sha256(concat(utf8(name), Uint8Array.of(0x0a, 0x01), rawPublicKey)).slice(0, 4);

// A C2SP signed note: its text and signature lines "— <name> <base64(key ID || signature)>".
export function splitNote(note) {
  const split = note.lastIndexOf("\n\n");
  if (split < 0 || !note.endsWith("\n")) throw new Error("not a signed note");
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split("\n");
  const signatures = lines.map((line) => {
    const match = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!match) throw new Error(`not a signature line: ${line}`);
    const blob = fromBase64(match[2]);
    return { name: match[1], keyId: blob.slice(0, 4), signature: blob.slice(4) };
  });
  return { text, signatures };
}

// The checkpoint a note carries: "<origin>\n<size>\n<base64 root>\n" (c2sp.org/tlog-checkpoint).
export function parseCheckpoint(text) {
  const [origin, size, root] = text.split("\n");
  if (!/^(0|[1-9][0-9]*)$/.test(size ?? "")) throw new Error("bad checkpoint size");
  return { origin, size: Number(size), root: fromBase64(root) };
}

// Published keys ({keyid, name, x, status}) with their raw bytes; a key whose keyid is not the
// hash of its bytes is dropped (the page shows what it was given, the check trusts bytes only).
export function usableKeys(published) {
  return published
    .map((key) => ({ ...key, raw: fromBase64Url(key.x) }))
    .filter((key) => key.raw.length === 32 && keyId(key.raw) === key.keyid);
}

// A list of check steps, each shown as it passes, fails, is skipped, or lacks its evidence
// (unavailable: what it would check could not be fetched, so nothing was found wrong either).
export class Steps {
  constructor(list) {
    this.list = list;
    this.list.replaceChildren();
    this.failed = null;
    this.unavailable = null;
  }

  add(name, label) {
    const item = document.createElement("li");
    item.className = "step step-running";
    item.dataset.step = name;
    item.dataset.state = "running";
    const title = document.createElement("span");
    title.className = "step-label";
    title.textContent = label;
    const detail = document.createElement("span");
    detail.className = "step-detail";
    item.append(title, detail);
    this.list.append(item);
    const finish = (state, text) => {
      item.className = `step step-${state}`;
      item.dataset.state = state;
      detail.textContent = text;
      if (state === "fail" && this.failed === null) this.failed = name;
      if (state === "unavailable" && this.unavailable === null) this.unavailable = name;
      return state !== "fail";
    };
    return {
      pass: (text) => finish("pass", text),
      fail: (text) => finish("fail", text),
      skip: (text) => finish("skip", text),
      unavailable: (text) => finish("unavailable", text),
    };
  }
}

// Write the outcome into `element`: data-outcome = passed | failed | unavailable. A failed step
// wins; else a step whose evidence could not be fetched makes the outcome neutral
// (`unavailableText`), never FAILED: a missing file is not a tampered one.
export function showOutcome(element, steps, passedText, unavailableText = "") {
  let outcome = steps.failed === null ? "passed" : "failed";
  if (outcome === "passed" && steps.unavailable !== null) outcome = "unavailable";
  const looks = { passed: "badge-ok", failed: "badge-bad", unavailable: "badge-info" };
  const texts = {
    passed: passedText,
    failed: `FAILED at step: ${steps.failed}`,
    unavailable: unavailableText || `not checked: ${steps.unavailable}`,
  };
  element.dataset.outcome = outcome;
  element.className = `outcome badge ${looks[outcome]}`;
  element.textContent = texts[outcome];
  element.hidden = false;
}
