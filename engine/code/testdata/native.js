// Memory outside the V8 heap, which --max-old-space-size does not bound
// (runmemory_test.go); one source for JavaScript and ArkTS (valid strict
// TypeScript too). Each mode but "fits" asks for 4 GiB and prints "survived"
// if it got it: only the engine's measurement or the memory cgroup can make it
// an MLE. Modes:
//   buffer      Buffer.alloc (filled)
//   unsafeslow  Buffer.allocUnsafeSlow, touched (outside the pool)
//   wasm        one WebAssembly.Memory grown 16 MiB at a time, touched
//   workers     four worker_threads, each filling its own V8 heap
//   worker      one worker_thread filling its own V8 heap past its limit
//   fits        100 MiB of Buffers under a 256 MiB limit: AC after the above
const { Buffer } = require("buffer");
const { Worker } = require("worker_threads");
const mode = require("fs").readFileSync(0, "utf8").trim();
const MiB = 1 << 20;
const keep = [];
if (mode === "buffer") {
  for (let got = 0; got < 4096; got += 16) keep.push(Buffer.alloc(16 * MiB, 1));
} else if (mode === "unsafeslow") {
  for (let got = 0; got < 4096; got += 16) {
    const b = Buffer.allocUnsafeSlow(16 * MiB);
    for (let o = 0; o < b.length; o += 4096) b[o] = 1;
    keep.push(b);
  }
} else if (mode === "wasm") {
  // Looked up at run time: tsc's es2020 library does not declare WebAssembly.
  const wasm = Function("return WebAssembly")();
  const memory = new wasm.Memory({ initial: 0, maximum: 65536 });
  for (let got = 0; got < 4096 - 16; got += 16) {
    memory.grow(256); // 256 pages of 64 KiB
    const view = new Uint8Array(memory.buffer, got * MiB, 16 * MiB);
    for (let o = 0; o < view.length; o += 4096) view[o] = 1;
  }
} else if (mode === "workers" || mode === "worker") {
  const fill = "const keep = []; for (;;) keep.push(new Array(1 << 20).fill(1.5));";
  const n = mode === "workers" ? 4 : 1;
  for (let i = 0; i < n; i++) new Worker(fill, { eval: true });
} else if (mode === "fits") {
  for (let got = 0; got < 100; got += 10) keep.push(Buffer.alloc(10 * MiB, 1));
}
if (mode === "fits") console.log("held");
else if (mode !== "workers" && mode !== "worker") console.log("survived");
