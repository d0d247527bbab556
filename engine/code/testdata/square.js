// Communication-task process in JavaScript (see manager.cpp and
// square.cpp): process.argv[2] is its index; it reads "x word" and answers
// x squared. The word chooses the behaviour, as in square.cpp; "fork"
// starts a busy child process and waits for it. Synchronous fs reads and
// writes on descriptors 0 and 1, as a program talking over pipes must.
const fs = require("fs");

function readLine() {
  const buf = Buffer.alloc(1);
  let line = "";
  for (;;) {
    const n = fs.readSync(0, buf, 0, 1, null);
    if (n === 0) return line === "" ? null : line;
    const c = buf.toString("utf8", 0, 1);
    if (c === "\n") return line;
    line += c;
  }
}

if (process.argv.length < 3) process.exit(9);
const [xText, w] = readLine().trim().split(/\s+/);
const x = BigInt(xText);
let spin = 0;
if (w === "tle") {
  for (;;) spin++;
}
if (w === "burn") {
  // process.cpuUsage() is the whole process: user + system, microseconds.
  for (;;) {
    const u = process.cpuUsage();
    if (u.user + u.system >= 600000) break;
    for (let i = 0; i < 100000; i++) spin++;
  }
}
if (w === "fork") {
  require("child_process").spawnSync("/bin/sh", ["-c", "while :; do :; done"], { stdio: "ignore" });
}
if (w === "idle") {
  readLine();
  process.exit(0);
}
if (w === "re") process.exit(3);
if (w === "flood") {
  for (;;) fs.writeSync(1, "1\n");
}
fs.writeSync(1, String(x * x + (w === "wrong" ? 1n : 0n)) + "\n");
