// Guess-the-number contestant (see interactor.cpp and guess.cpp): the word
// the interactor sends chooses the behaviour.
import java.io.*;

public class Guess {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        PrintStream out = System.out;
        String[] first = in.readLine().trim().split(" ");
        long n = Long.parseLong(first[0]);
        String word = first[1];
        if (word.equals("tle")) {
            long x = 0;
            while (true) x++;
        }
        if (word.equals("idle")) {
            in.readLine();
            return;
        }
        if (word.equals("flood")) {
            while (!out.checkError()) out.println(1);
            return;
        }
        if (word.equals("re")) System.exit(3);
        if (word.equals("peek")) {
            for (String p : new String[] {"/pipe", "/exp/0", "/in/0", "/cin/0"}) {
                try (FileInputStream f = new FileInputStream(p)) {
                    System.exit(42);
                } catch (IOException e) {
                    // not readable: as it should be
                }
            }
        }
        long lo = 1, hi = n, step = 1;
        while (true) {
            long g = word.equals("linear") ? step++ : (lo + hi) / 2;
            out.println(g);
            out.flush();
            String r = in.readLine();
            if (r == null || r.trim().equals("=")) return;
            if (r.trim().equals("<")) hi = g - 1;
            else lo = g + 1;
        }
    }
}
