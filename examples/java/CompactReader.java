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

  /** Sub-bucket count of the bucket whose key prefix is `pre` (its state key holds k * 2^21 + n). */
  private long subBuckets(String pre) throws IOException {
    String state = call("GET", pre + "n");
    return state == null ? 1 : Long.parseLong(state) % (1L << 21);
  }

  /**
   * Whether bucket `base` holds `member`. A bucket splits into sub-buckets as it fills (linear
   * hashing on the member's low 20 bits). A split between reading the count and asking the
   * sub-bucket changes the count (it only grows), so an absent answer is trusted only when the
   * count is still the same afterwards.
   */
  private boolean contains(String base, long member) throws IOException {
    int o = base.indexOf('{');
    int c = o < 0 ? -1 : base.indexOf('}', o + 1);
    String pre = c > o + 1 ? base + ":" : base + ":{" + base + "}:";
    long n = subBuckets(pre);
    while (true) {
      long s = 0;
      if (n > 1) {
        long l2 = Long.highestOneBit(n);
        long r = member & 0xFFFFF;
        s = r % (2 * l2);
        if (s >= n) s = r % l2;
      }
      if ("1".equals(call("SISMEMBER", s == 0 ? base : pre + s, Long.toString(member)))) return true;
      long again = subBuckets(pre);
      if (again == n) return false;
      n = again;
    }
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
      BufferedReader keys = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String key = keys.readLine(); key != null; key = keys.readLine()) {
        boolean seen = false;
        if (buckets > 0) {
          HashCode h = Hashing.murmur3_128().hashString(key, StandardCharsets.UTF_8);
          byte[] b = h.asBytes();
          long member = h.asLong(); // bytes 0..7 little-endian; Redis holds its signed decimal
          long hi = ByteBuffer.wrap(b, 8, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
          long bucket = Long.remainderUnsigned(hi, buckets); // bytes 8..15 pick the bucket
          seen = redis.contains(prefix + ":" + window + ":c:" + bucket, member);
        }
        System.out.println(key + "\t" + (seen ? 1 : 0));
      }
    }
  }
}
