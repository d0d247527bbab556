// Memory outside the Java heap, which -Xmx does not bound: the run's memory
// cgroup must hold it (runmemory_test.go). Modes: unsafe, direct.
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Scanner;

public class Main {
    public static void main(String[] args) throws Exception {
        String mode = new Scanner(System.in).next();
        List<ByteBuffer> keep = new ArrayList<>();
        final int chunk = 16 << 20;
        for (long total = 0; total < (4L << 30); total += chunk) {
            if (mode.equals("unsafe")) {
                Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                sun.misc.Unsafe u = (sun.misc.Unsafe) f.get(null);
                u.setMemory(u.allocateMemory(chunk), chunk, (byte) 1);
            } else {
                ByteBuffer b = ByteBuffer.allocateDirect(chunk);
                for (int o = 0; o < chunk; o += 4096) b.put(o, (byte) 1);
                keep.add(b);
            }
        }
        System.out.println("survived 4 GiB off-heap");
    }
}
