import com.sun.management.OperatingSystemMXBean;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;

// CPU burner for the timing calibration (see burn.cpp): input
// "self <limit_ms> <percent>"; spins until the JVM's process CPU time (every
// thread: JIT compilers and GC included) reaches percent% of limit_ms, then
// prints it in microseconds. OpenJDK 17 on Linux reads it with times(2), so
// it moves in 10 ms steps.
public class Main {
    public static void main(String[] args) throws Exception {
        String[] w = new BufferedReader(new InputStreamReader(System.in)).readLine().trim().split("\\s+");
        if (!w[0].equals("self")) System.exit(6);
        long targetNs = (long) (Long.parseLong(w[1]) * 1e6 * Double.parseDouble(w[2]) / 100.0);
        OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long x = 0;
        while (os.getProcessCpuTime() < targetNs) x++;
        System.out.println(os.getProcessCpuTime() / 1000);
        if (x == -1) System.out.println(x); // keeps the loop from being optimised away
    }
}
