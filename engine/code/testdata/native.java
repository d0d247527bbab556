// Memory outside the Java heap, which -Xmx does not bound (runmemory_test.go).
// Each mode but "fits" asks for more than any limit and prints "survived" if
// the JVM let it finish: only the engine's measurement, the JVM's own caps or
// the memory cgroup can make it an MLE. Modes:
//   unsafe   sun.misc.Unsafe.allocateMemory, touched
//   direct   ByteBuffer.allocateDirect, touched and kept
//   threads  100 threads, each filling its 64 MiB stack (-Xss) and waiting
//   classes  hidden classes defined until metaspace holds 4 GiB
//   fits     a 128 MiB array on a 256 MiB heap: AC after every mode above
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Scanner;
import java.util.concurrent.CountDownLatch;

public class Main {
    static void dive(int depth) {
        dive(depth + 1);
    }

    // The class file of "final class K {}" (no methods), version 61.
    static final byte[] K = {
        (byte) 0xCA, (byte) 0xFE, (byte) 0xBA, (byte) 0xBE, 0, 0, 0, 61, 0, 5,
        7, 0, 2, 1, 0, 1, 'K', 7, 0, 4, 1, 0, 16,
        'j', 'a', 'v', 'a', '/', 'l', 'a', 'n', 'g', '/', 'O', 'b', 'j', 'e', 'c', 't',
        0, 0x30, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0,
    };

    public static void main(String[] args) throws Exception {
        String mode = new Scanner(System.in).next();
        List<Object> keep = new ArrayList<>();
        final int chunk = 16 << 20;
        switch (mode) {
            case "unsafe" -> {
                Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
                f.setAccessible(true);
                sun.misc.Unsafe u = (sun.misc.Unsafe) f.get(null);
                for (long total = 0; total < (4L << 30); total += chunk) {
                    u.setMemory(u.allocateMemory(chunk), chunk, (byte) 1);
                }
            }
            case "direct" -> {
                for (long total = 0; total < (4L << 30); total += chunk) {
                    ByteBuffer b = ByteBuffer.allocateDirect(chunk);
                    for (int o = 0; o < chunk; o += 4096) b.put(o, (byte) 1);
                    keep.add(b);
                }
            }
            case "threads" -> {
                CountDownLatch full = new CountDownLatch(100);
                for (int i = 0; i < 100; i++) {
                    Thread t = new Thread(() -> {
                        try {
                            dive(0);
                        } catch (StackOverflowError e) {
                            // the whole stack has been touched
                        }
                        full.countDown();
                        try {
                            Thread.sleep(Long.MAX_VALUE);
                        } catch (InterruptedException e) {
                            // never interrupted
                        }
                    });
                    t.setDaemon(true);
                    t.start();
                }
                full.await();
            }
            case "classes" -> {
                MethodHandles.Lookup l = MethodHandles.lookup();
                for (int i = 0; i < 4_000_000; i++) keep.add(l.defineHiddenClass(K, false).lookupClass());
            }
            case "fits" -> {
                byte[] a = new byte[128 << 20];
                for (int o = 0; o < a.length; o += 4096) a[o] = 1;
                System.out.println("held");
                return;
            }
            default -> throw new IllegalArgumentException(mode);
        }
        System.out.println("survived");
    }
}
