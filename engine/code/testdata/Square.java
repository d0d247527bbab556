// Communication-task process in Java (see manager.cpp and square.cpp):
// args[0] is its index; it reads "x word" and answers x squared. The word
// chooses the behaviour, as in square.cpp; "fork" starts a busy child
// process (the JVM cannot fork itself) and waits for it.
import java.io.*;
import java.lang.management.ManagementFactory;

public class Square {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) System.exit(9);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        PrintStream out = System.out;
        String[] first = in.readLine().trim().split(" ");
        long x = Long.parseLong(first[0]);
        String w = first[1];
        long spin = 0;
        if (w.equals("tle")) {
            while (true) spin++;
        }
        if (w.equals("burn")) {
            // The process's CPU time, every JVM thread: 0.6 s in all.
            com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
            while (os.getProcessCpuTime() < 600_000_000L) spin++;
        }
        if (w.equals("fork")) {
            new ProcessBuilder("/bin/sh", "-c", "while :; do :; done").start().waitFor();
        }
        if (w.equals("idle")) {
            in.readLine();
            return;
        }
        if (w.equals("re")) System.exit(3);
        if (w.equals("flood")) {
            while (!out.checkError()) out.println(1);
            return;
        }
        out.println(x * x + (w.equals("wrong") ? 1 : 0));
        out.flush();
        if (spin < 0) System.exit(8); // keeps the loops from being dropped
    }
}
