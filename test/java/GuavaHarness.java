// Oracle for hashgate's Guava compatibility tests (compiled and run by test/helpers/java.ts).
// Keys are read from stdin, one per line (UTF-8), or hex-encoded bytes with --hex.
//
//   hash [--seed N] [--hex]          per key: murmur3_128 hex, murmur3_32_fixed (unsigned), asLong
//   build OUT N FPP [--hex]          BloomFilter.create(n, fpp) over the keys, writeTo(OUT); prints "k bitSize"
//   check IN [--hex]                 BloomFilter.readFrom(IN); prints one line of 0/1, one char per key
//   sizing                           per "n p" line: numBits k bitSize (Guava's own sizing methods)
//   version                          Guava version from the jar manifest
import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnel;
import com.google.common.hash.Funnels;
import com.google.common.hash.HashCode;
import com.google.common.hash.Hashing;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public final class GuavaHarness {
  private static final Funnel<byte[]> FUNNEL = Funnels.byteArrayFunnel();

  public static void main(String[] args) throws Exception {
    if (args.length == 0) throw new IllegalArgumentException("mode required");
    boolean hex = false;
    int seed = 0;
    List<String> pos = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--hex")) hex = true;
      else if (args[i].equals("--seed")) seed = (int) Long.parseLong(args[++i]);
      else pos.add(args[i]);
    }
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
    BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
    switch (pos.get(0)) {
      case "hash": {
        String line;
        while ((line = in.readLine()) != null) {
          byte[] key = bytes(line, hex);
          HashCode h128 = Hashing.murmur3_128(seed).hashBytes(key);
          int h32 = Hashing.murmur3_32_fixed(seed).hashBytes(key).asInt();
          out.write(h128.toString());
          out.write(' ');
          out.write(Integer.toUnsignedString(h32));
          out.write(' ');
          out.write(Long.toString(h128.asLong()));
          out.write('\n');
        }
        break;
      }
      case "build": {
        long n = Long.parseLong(pos.get(2));
        double fpp = Double.parseDouble(pos.get(3));
        BloomFilter<byte[]> f = BloomFilter.create(FUNNEL, n, fpp);
        String line;
        while ((line = in.readLine()) != null) f.put(bytes(line, hex));
        try (BufferedOutputStream os = new BufferedOutputStream(new FileOutputStream(pos.get(1)))) {
          f.writeTo(os);
        }
        out.write(numHashFunctions(f) + " " + bitSize(f) + "\n");
        break;
      }
      case "check": {
        BloomFilter<byte[]> f;
        try (BufferedInputStream is = new BufferedInputStream(new FileInputStream(pos.get(1)))) {
          f = BloomFilter.readFrom(is, FUNNEL);
        }
        String line;
        StringBuilder sb = new StringBuilder();
        while ((line = in.readLine()) != null) sb.append(f.mightContain(bytes(line, hex)) ? '1' : '0');
        out.write(sb.toString());
        out.write('\n');
        break;
      }
      case "sizing": {
        Method bits = BloomFilter.class.getDeclaredMethod("optimalNumOfBits", long.class, double.class);
        bits.setAccessible(true);
        Method hashes = null;
        try {
          hashes = BloomFilter.class.getDeclaredMethod("optimalNumOfHashFunctions", double.class);
        } catch (NoSuchMethodException e) {
          hashes = BloomFilter.class.getDeclaredMethod("optimalNumOfHashFunctions", long.class, long.class);
        }
        hashes.setAccessible(true);
        String line;
        while ((line = in.readLine()) != null) {
          line = line.trim();
          if (line.isEmpty()) continue;
          String[] p = line.split("\\s+");
          long n = Long.parseLong(p[0]);
          double fpp = Double.parseDouble(p[1]);
          long nn = n == 0 ? 1 : n; // as BloomFilter.create does
          long numBits = (Long) bits.invoke(null, nn, fpp);
          int k = hashes.getParameterCount() == 1
              ? (Integer) hashes.invoke(null, fpp)
              : (Integer) hashes.invoke(null, nn, numBits);
          // For small filters, prove the rounding with a real instance.
          long bitSize = numBits <= (1L << 26) ? bitSize(BloomFilter.create(FUNNEL, n, fpp)) : -1;
          out.write(numBits + " " + k + " " + bitSize + "\n");
        }
        break;
      }
      case "version": {
        Package pk = BloomFilter.class.getPackage();
        out.write(String.valueOf(pk.getImplementationVersion()) + "\n");
        break;
      }
      default:
        throw new IllegalArgumentException("unknown mode " + pos.get(0));
    }
    out.flush();
  }

  private static byte[] bytes(String line, boolean hex) {
    if (!hex) return line.getBytes(StandardCharsets.UTF_8);
    byte[] b = new byte[line.length() / 2];
    for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
    return b;
  }

  /** Word count and k from the serialized header: public API only. */
  private static long bitSize(BloomFilter<byte[]> f) throws Exception {
    java.io.ByteArrayOutputStream bo = new java.io.ByteArrayOutputStream();
    f.writeTo(bo);
    byte[] b = bo.toByteArray();
    long words = ((b[2] & 0xffL) << 24) | ((b[3] & 0xffL) << 16) | ((b[4] & 0xffL) << 8) | (b[5] & 0xffL);
    return words * 64;
  }

  private static int numHashFunctions(BloomFilter<byte[]> f) throws Exception {
    java.io.ByteArrayOutputStream bo = new java.io.ByteArrayOutputStream();
    f.writeTo(bo);
    return bo.toByteArray()[1] & 0xff;
  }
}
