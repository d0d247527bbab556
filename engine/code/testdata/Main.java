import java.io.*;
import java.util.*;

// Same modes as prog.cpp (see there).
public class Main {
    static int depth(int n) { return depth(n + 1) + 1; }
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder all = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) all.append(line).append(' ');
        StringTokenizer st = new StringTokenizer(all.toString());
        if (!st.hasMoreTokens()) return;
        String m = st.nextToken();
        switch (m) {
            case "sum": System.out.println(Long.parseLong(st.nextToken()) + Long.parseLong(st.nextToken())); break;
            case "busy": { long x = 0; while (true) { x++; if (x == Long.MIN_VALUE) System.out.println(x); } }
            case "sleep": Thread.sleep(30000); System.out.println("woke"); break;
            case "mem": { List<long[]> keep = new ArrayList<>(); while (true) keep.add(new long[1 << 20]); }
            case "hugealloc": { long[] big = new long[1 << 30]; System.out.println(big[1]); break; } // 8 GiB: beyond any -Xmx here
            case "printoom": System.out.println("java.lang.OutOfMemoryError"); System.err.println("Too small maximum heap"); break;
            case "throw": throw new RuntimeException("boom");
            case "segv": {
                java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                ((sun.misc.Unsafe) f.get(null)).putAddress(0, 0);
                break;
            }
            case "exit": System.out.println("partial"); System.out.flush(); System.exit(3);
            case "ole": { while (true) System.out.println("0123456789abcdef0123456789abcdef"); }
            case "float": System.out.printf("%.8f%n", Math.PI); break;
            case "sqrt": System.out.println(Math.round(Math.sqrt(Long.parseLong(st.nextToken())))); break;
            case "sqrtbad": System.out.println(Long.parseLong(st.nextToken())); break;
            default: System.out.println("unknown mode " + m); System.exit(9);
        }
    }
}
