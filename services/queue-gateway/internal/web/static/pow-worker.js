// The proof-of-work solver of the waiting-room page, run as a Web Worker so
// the page stays responsive while it works.
//
// Given {challenge, bits}, it finds a nonce (a decimal string) such that
// SHA-256(challenge + ":" + nonce) starts with `bits` zero bits, posting
// {hashes} about every PROGRESS_MS and {nonce, hashes} when done.
//
// SHA-256 is computed here rather than with crypto.subtle.digest, which is
// async: in headless Chromium 156 on a 2-core machine this loop did about
// 0.5 M hashes/s, subtle 0.014 M/s one digest per await and 0.02 to 0.03 M/s
// with 64 or 1,024 digests per Promise.all. subtle also exists only on
// secure origins.
// The prefix `challenge:` never changes, so its full 64-byte blocks are
// compressed once (the midstate); each nonce costs only the last block or two.
'use strict';

const PROGRESS_MS = 200;
const CHECK_EVERY = 1024; // hashes between looks at the clock

// The constants of FIPS 180-4: the first 32 bits of the fractional parts of
// the square roots (initial hash) and cube roots (round constants) of the
// first primes. Computed, not typed in; the page's tests check known digests.
function primes(n) {
  const out = [];
  for (let c = 2; out.length < n; c++) {
    if (out.every((p) => c % p !== 0)) out.push(c);
  }
  return out;
}
const frac32 = (x) => Math.floor((x - Math.floor(x)) * 2 ** 32) >>> 0;
const P64 = primes(64);
const IV = Uint32Array.from(P64.slice(0, 8), (p) => frac32(Math.sqrt(p)));
const K = Uint32Array.from(P64, (p) => frac32(Math.cbrt(p)));

const W = new Int32Array(64);

// compress runs the SHA-256 compression of the 64-byte block at
// block[off..off+64) over the state H (8 words), in place.
function compress(H, block, off) {
  for (let i = 0; i < 16; i++) {
    const j = off + 4 * i;
    W[i] = (block[j] << 24) | (block[j + 1] << 16) | (block[j + 2] << 8) | block[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15];
    const y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = H[0] | 0, b = H[1] | 0, c = H[2] | 0, d = H[3] | 0;
  let e = H[4] | 0, f = H[5] | 0, g = H[6] | 0, h = H[7] | 0;
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + S1 + ch + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  H[0] += a; H[1] += b; H[2] += c; H[3] += d;
  H[4] += e; H[5] += f; H[6] += g; H[7] += h;
}

// Solver holds the midstate of a prefix and hashes prefix + nonce digits.
class Solver {
  constructor(prefix) {
    const bytes = new TextEncoder().encode(prefix);
    this.mid = IV.slice();
    const full = bytes.length - (bytes.length % 64);
    for (let off = 0; off < full; off += 64) compress(this.mid, bytes, off);
    this.total = bytes.length; // bytes before the nonce
    this.rest = bytes.length - full; // of them, in the tail blocks
    this.tail = new Uint8Array(128);
    this.tail.set(bytes.subarray(full));
    this.state = new Uint32Array(8);
    this.setDigits('0');
  }

  // setDigits writes the nonce and the padding into the tail blocks.
  setDigits(digits) {
    const t = this.tail;
    const end = this.rest + digits.length;
    for (let i = 0; i < digits.length; i++) t[this.rest + i] = digits.charCodeAt(i);
    t.fill(0, end);
    t[end] = 0x80;
    this.blocks = end + 9 <= 64 ? 1 : 2;
    const bits = (this.total + digits.length) * 8; // < 2^32 for any challenge we take
    const last = this.blocks * 64;
    t[last - 4] = bits >>> 24; t[last - 3] = bits >>> 16; t[last - 2] = bits >>> 8; t[last - 1] = bits;
    this.len = digits.length;
  }

  // next moves to the following nonce, counting in decimal in place.
  next() {
    const t = this.tail;
    let i = this.rest + this.len - 1;
    while (i >= this.rest && t[i] === 57) t[i--] = 48;
    if (i >= this.rest) {
      t[i]++;
      return;
    }
    this.setDigits('1' + '0'.repeat(this.len)); // 99 -> 100
  }

  nonce() { return String.fromCharCode(...this.tail.subarray(this.rest, this.rest + this.len)); }

  // digest hashes the current nonce into this.state.
  digest() {
    this.state.set(this.mid);
    compress(this.state, this.tail, 0);
    if (this.blocks === 2) compress(this.state, this.tail, 64);
    return this.state;
  }
}

// solve counts nonces from 0 until one has `bits` leading zero bits.
function solve(challenge, bits, report) {
  const s = new Solver(`${challenge}:`);
  const shift = 32 - bits; // bits is 1..32: only the first word decides
  let last = performance.now();
  for (let hashes = 1; ; hashes++) {
    if (s.digest()[0] >>> shift === 0) return { nonce: s.nonce(), hashes };
    s.next();
    if (hashes % CHECK_EVERY === 0 && performance.now() - last >= PROGRESS_MS) {
      last = performance.now();
      report(hashes);
    }
  }
}

self.onmessage = (e) => {
  const { challenge, bits } = e.data || {};
  if (typeof challenge !== 'string' || !Number.isInteger(bits) || bits < 1 || bits > 32) {
    return self.postMessage({ error: 'bad challenge' });
  }
  self.postMessage(solve(challenge, bits, (hashes) => self.postMessage({ hashes })));
};
