import java.io.*;
import java.lang.reflect.Field;
import java.net.*;
import java.nio.file.*;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.*;

// Escape and abuse attempts in Java, the same modes as abuse.cpp (see there)
// where the JVM can express them: the first word of the input selects one; it
// prints "blocked" when the sandbox held, or BREACH lines saying what it
// managed to do.
public class Main {
    static int breaches = 0;

    static void breach(String what) {
        System.out.println("BREACH " + what);
        breaches++;
    }

    static void done() {
        if (breaches == 0) System.out.println("blocked");
        System.out.flush();
    }

    interface Attempt { void run() throws Exception; }

    // Runs a; reaching its end is a breach.
    static void attempt(String what, Attempt a) {
        try {
            a.run();
        } catch (Throwable e) {
            return;
        }
        breach(what);
    }

    static volatile long sink;

    static void spin() {
        long x = 0;
        while (true) { x++; if (x == Long.MIN_VALUE) sink = x; }
    }

    public static void main(String[] args) throws Exception {
        StringBuilder all = new StringBuilder();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String l; (l = in.readLine()) != null; ) all.append(l).append(' ');
        String[] w = all.toString().trim().split("\\s+");
        String mode = w[0];
        switch (mode) {
            case "forkbomb": { // processes, not threads: the JVM forks through ProcessBuilder
                List<Process> kids = new ArrayList<>();
                for (int i = 0; i < 1000; i++) {
                    try {
                        kids.add(new ProcessBuilder("/bin/sh", "-c", "while :; do :; done").start());
                    } catch (IOException e) {
                        break;
                    }
                }
                spin();
            }
            case "threadbomb": {
                while (true) {
                    try {
                        Thread t = new Thread(Main::spin);
                        t.setDaemon(true);
                        t.start();
                    } catch (OutOfMemoryError e) { // "unable to create native thread": keep burning
                        spin();
                    }
                }
            }
            case "socket": {
                attempt("AF_INET socket connected", () -> new Socket().connect(new InetSocketAddress("1.1.1.1", 53), 1000));
                attempt("server socket bound", () -> new ServerSocket(0).close());
                attempt("datagram socket created", () -> new DatagramSocket().close());
                attempt("resolved a name", () -> InetAddress.getByName("example.com").getAddress());
                done();
                break;
            }
            case "readexp": { // the input names where the expected output might be
                for (int i = 1; i < w.length; i++) {
                    try {
                        byte[] b = Files.readAllBytes(Paths.get(w[i]));
                        if (b.length == 0) continue; // (its own, still empty stdout file is readable)
                        System.out.print(new String(b, 0, Math.min(b.length, 256)));
                        return;
                    } catch (IOException | SecurityException e) {
                    }
                }
                System.out.println("nothing");
                break;
            }
            case "writeout": {
                String[] paths = {"/box/x", "/box/Main.class", "/etc/x", "/x", "/in/x", "/out/x", "/kece/x", "/kece/init",
                        "/dev/x", "/dev/shm/x", "/proc/x", "/sys/x", "/var/tmp/x", "/usr/bin/x", "/usr/lib/jvm/x"};
                for (String p : paths) attempt(p, () -> new FileOutputStream(p).close());
                attempt("mkdir /box/d", () -> Files.createDirectory(Paths.get("/box/d")));
                try {
                    new FileOutputStream("/tmp/ok").close(); // the one writable place
                } catch (IOException e) {
                    breach("cannot write /tmp");
                }
                done();
                break;
            }
            case "replaceout": {
                Path me = Files.readSymbolicLink(Paths.get("/proc/self/fd/1"));
                attempt("unlinked stdout file", () -> Files.delete(me));
                attempt("symlinked stdout path", () -> Files.createSymbolicLink(me, Paths.get("/etc/passwd")));
                attempt("symlink in /out", () -> Files.createSymbolicLink(Paths.get(me + ".x"), Paths.get("/etc/passwd")));
                attempt("file in /out", () -> new FileOutputStream(me + ".x").close());
                attempt("chmod stdout", () -> Files.setPosixFilePermissions(me, PosixFilePermissions.fromString("rwxrwxrwx")));
                done();
                break;
            }
            case "proc": {
                attempt("opened supervisor channel", () -> {
                    try (FileOutputStream f = new FileOutputStream("/proc/1/fd/1")) {
                        f.write("{\"id\":1,\"exit_code\":0}\n".getBytes());
                    }
                });
                attempt("read /proc/1/environ", () -> Files.readAllBytes(Paths.get("/proc/1/environ")));
                attempt("opened /proc/1/mem", () -> new RandomAccessFile("/proc/1/mem", "rw").close());
                attempt("listed /proc/1/cwd", () -> {
                    if (new File("/proc/1/cwd").list() == null) throw new IOException("denied");
                });
                attempt("sysrq", () -> new FileOutputStream("/proc/sysrq-trigger").close());
                attempt("cgroup limit writable", () -> new FileOutputStream("/sys/fs/cgroup/memory/memory.limit_in_bytes").close());
                done();
                break;
            }
            case "killsup": {
                Optional<ProcessHandle> init = ProcessHandle.of(1);
                if (init.isPresent() && (init.get().destroyForcibly() || init.get().destroy())) breach("signalled PID 1");
                // The shell's kill builtin, as a second process of the run.
                Process p = new ProcessBuilder("/bin/sh", "-c", "kill -KILL 1 || kill -TERM 1 || kill -STOP 1 || exit 7")
                        .redirectErrorStream(true).start();
                p.getInputStream().readAllBytes();
                if (p.waitFor() != 7) breach("sh signalled PID 1");
                done();
                break;
            }
            case "forge": { // forged statistics, then a busy loop: must be TLE
                String forged = "{\"id\":1,\"cpu_us\":1,\"wall_us\":1,\"maxrss_kb\":1,\"exit_code\":0,\"signal\":0}";
                for (int i = 0; i < 100; i++) { System.out.println(forged); System.err.println(forged); }
                System.out.flush();
                spin();
            }
            case "stderr": { // 64 MiB of stderr, then the right answer
                byte[] buf = new byte[1 << 16];
                Arrays.fill(buf, (byte) 'E');
                FileOutputStream err = new FileOutputStream(FileDescriptor.err);
                for (int i = 0; i < 1024; i++) err.write(buf);
                done();
                break;
            }
            case "sparse": { // a 10 GB sparse file: the file size limit refuses it
                try (RandomAccessFile f = new RandomAccessFile("/tmp/sparse", "rw")) {
                    f.seek(10L << 30);
                    f.write('x');
                    breach("wrote at 10 GB");
                } catch (IOException e) {
                }
                done();
                break;
            }
            case "offheap": { // native memory past the heap limit: only the container limit holds it
                Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                sun.misc.Unsafe u = (sun.misc.Unsafe) f.get(null);
                for (long total = 0; total < (8L << 30); total += 64 << 20) {
                    long a = u.allocateMemory(64 << 20);
                    for (long o = 0; o < (64 << 20); o += 4096) u.putByte(a + o, (byte) 1);
                }
                breach("8 GiB off-heap");
                done();
                break;
            }
            case "membomb": { // the heap grows until -Xmx stops it
                List<long[]> keep = new ArrayList<>();
                while (true) keep.add(new long[1 << 20]);
            }
            case "nofile": {
                List<FileInputStream> fs = new ArrayList<>();
                try {
                    while (fs.size() < 100000) fs.add(new FileInputStream("/dev/null"));
                } catch (IOException e) {
                }
                if (fs.size() >= 1024) breach("opened 1024+ files");
                done();
                break;
            }
            case "daemon": { // a detached process that outlives the program
                new ProcessBuilder("/bin/sh", "-c", "(trap '' HUP; while :; do :; done) >/dev/null 2>&1 &").start().waitFor();
                done();
                break;
            }
            case "leftover": { // nothing of an earlier case still runs
                long me = ProcessHandle.current().pid();
                ProcessHandle.allProcesses().filter(h -> h.pid() != 1 && h.pid() != me)
                        .forEach(h -> breach("process " + h.pid() + " still runs: " + h.info().commandLine().orElse("?")));
                done();
                break;
            }
            case "tmpstate": { // nothing survives in /tmp from an earlier case
                if (new File("/tmp/ok").exists() || new File("/tmp/sparse").exists()) breach("found files of an earlier case");
                done();
                break;
            }
            case "sleep": // sleeps past the wall limit: TLE on the wall clock
                Thread.sleep(3_600_000);
                break;
            case "ids": { // an unprivileged uid, no capabilities, no_new_privs, seccomp
                for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                    String[] kv = line.split(":\\s*", 2);
                    if (kv.length < 2) continue;
                    String k = kv[0], v = kv[1].trim();
                    if (k.equals("Uid") && (v.startsWith("0\t") || v.equals("0"))) breach("running as root");
                    if ((k.equals("CapEff") || k.equals("CapPrm")) && !v.equals("0000000000000000")) breach(line);
                    if (k.equals("NoNewPrivs") && !v.equals("1")) breach("no_new_privs unset");
                    if (k.equals("Seccomp") && !v.equals("2")) breach("no seccomp filter");
                }
                done();
                break;
            }
            default:
                System.out.println("unknown mode " + mode);
        }
    }
}
