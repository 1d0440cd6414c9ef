// Reads hashgate's default "compact" dedup layout from Java: for each key on stdin, prints
// "<key>\t1" when the key was seen in the window, "<key>\t0" otherwise. Guava computes the digest
// exactly as hashgate does; the Redis calls are plain RESP over a socket so the example needs no
// client library (with Redisson: redisson.getSet(key, StringCodec.INSTANCE).contains(member)).
//
//   javac -cp guava.jar CompactReader.java
//   java -cp guava.jar:. CompactReader 127.0.0.1 6379 hg:dedup 2026 < keys.txt
import com.google.common.hash.HashCode;
import com.google.common.hash.Hashing;

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

public final class CompactReader {
  private final DataInputStream in;
  private final OutputStream out;

  private CompactReader(Socket socket) throws IOException {
    this.in = new DataInputStream(socket.getInputStream());
    this.out = socket.getOutputStream();
  }

  /** Sends one command as a RESP array of bulk strings and returns the reply as a string. */
  private String call(String... args) throws IOException {
    StringBuilder sb = new StringBuilder("*").append(args.length).append("\r\n");
    for (String a : args) {
      byte[] b = a.getBytes(StandardCharsets.UTF_8);
      sb.append('$').append(b.length).append("\r\n").append(a).append("\r\n");
    }
    out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
    out.flush();
    String line = readLine();
    switch (line.charAt(0)) {
      case ':': case '+': return line.substring(1);
      case '$': {
        int n = Integer.parseInt(line.substring(1));
        if (n < 0) return null;
        byte[] body = new byte[n + 2];
        in.readFully(body);
        return new String(body, 0, n, StandardCharsets.UTF_8);
      }
      default: throw new IOException("Redis: " + line);
    }
  }

  private String readLine() throws IOException {
    StringBuilder sb = new StringBuilder();
    for (int c = in.read(); c != '\r'; c = in.read()) {
      if (c < 0) throw new IOException("connection closed");
      sb.append((char) c);
    }
    in.read(); // '\n'
    return sb.toString();
  }

  /** Sub-bucket count of the table whose key prefix is `tp` (its state key holds it; missing = 1). */
  private long subBuckets(String tp) throws IOException {
    String state = call("GET", tp + "n");
    return state == null ? 1 : Long.parseLong(state);
  }

  /**
   * The sub-bucket of `member` in a table of n sub-buckets, as "s.d" (index and depth): linear
   * hashing on the address r, whose bit i is bit 63 - i of the member read as unsigned with the
   * same order (member XOR 2^63).
   */
  static String subBucket(long member, long n) {
    if (n <= 1) return "0.0";
    int r = Integer.reverse((int) ((member ^ Long.MIN_VALUE) >>> 44)) >>> 12;
    long l2 = Long.highestOneBit(n);
    long s = r % (2 * l2);
    if (s >= n) s = r % l2;
    int d = Long.numberOfTrailingZeros(l2);
    if (s < n - l2 || s >= l2) d++;
    return s + "." + d;
  }

  /**
   * Whether table `tp` holds `member`. A table splits into sub-buckets as it fills, and a
   * sub-bucket that split is left as a string (a tombstone): SISMEMBER on it is refused with
   * WRONGTYPE, and the reader reads the table's count again (it only grows) and asks the
   * sub-bucket that now holds the member.
   */
  private boolean contains(String tp, long member) throws IOException {
    for (int attempt = 0; attempt < 64; attempt++) {
      long n = subBuckets(tp);
      try {
        return "1".equals(call("SISMEMBER", tp + subBucket(member, n), Long.toString(member)));
      } catch (IOException e) {
        if (!e.getMessage().startsWith("Redis: -WRONGTYPE")) throw e;
      }
    }
    throw new IOException("the table kept splitting under the reader");
  }

  public static void main(String[] argv) throws IOException {
    String host = argv[0];
    int port = Integer.parseInt(argv[1]);
    String prefix = argv[2];
    String window = argv[3];
    try (Socket socket = new Socket(host, port)) {
      CompactReader redis = new CompactReader(socket);
      // The first writer of a window records its bucket count; nobody recorded one = nothing seen.
      String recorded = redis.call("HGET", prefix + ":" + window + ":meta", "compact.buckets");
      long buckets = recorded == null ? 0 : Long.parseLong(recorded);
      // the key names this reader knows (hashgate's compact layout 2)
      if (buckets > 0 && !"2".equals(redis.call("HGET", prefix + ":" + window + ":meta", "compact.layout"))) {
        System.err.println("window " + window + " was written by an older compact layout");
        System.exit(2);
      }
      BufferedReader keys = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String key = keys.readLine(); key != null; key = keys.readLine()) {
        boolean seen = false;
        if (buckets > 0) {
          HashCode h = Hashing.murmur3_128().hashString(key, StandardCharsets.UTF_8);
          byte[] b = h.asBytes();
          long member = h.asLong(); // bytes 0..7 little-endian; Redis holds its signed decimal
          long hi = ByteBuffer.wrap(b, 8, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
          long bucket = Long.remainderUnsigned(hi, buckets); // bytes 8..15 pick the table
          seen = redis.contains(prefix + ":" + window + ":c{" + bucket + "}", member);
        }
        System.out.println(key + "\t" + (seen ? 1 : 0));
      }
    }
  }
}
