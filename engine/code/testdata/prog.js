// Same modes as prog.cpp (see there), in JavaScript (Node.js, CommonJS):
// stdin is read whole through fs, output written with fs.writeSync.
'use strict';
const fs = require('fs');
const words = fs.readFileSync(0, 'utf8').split(/\s+/).filter((w) => w.length > 0);

function out(s) {
  fs.writeSync(1, s + '\n');
}

function main() {
  if (words.length === 0) return;
  const m = words[0];
  switch (m) {
    case 'sum': out(String(BigInt(words[1]) + BigInt(words[2]))); break;
    case 'busy': { let x = 0; for (;;) { x++; } }
    case 'sleep': { const sab = new SharedArrayBuffer(4); Atomics.wait(new Int32Array(sab), 0, 0, 30000); out('woke'); break; }
    case 'mem':
    case 'hugealloc': { const keep = []; for (;;) { keep.push(new Array(1 << 20).fill(1.5)); } }
    case 'printoom': out('JavaScript heap out of memory'); break;
    case 'throw': throw new Error('boom');
    case 'segv': process.kill(process.pid, 'SIGSEGV'); break;
    case 'exit': out('partial'); process.exit(3);
    case 'ole': { for (;;) out('0123456789abcdef0123456789abcdef'); }
    case 'float': out(Math.PI.toFixed(8)); break;
    case 'sqrt': out(String(Math.round(Math.sqrt(Number(words[1]))))); break;
    case 'sqrtbad': out(String(Number(words[1]))); break;
    default: out('unknown mode ' + m); process.exit(9);
  }
}
main();
