// Oracle for hashgate's Redisson compatibility tests (compiled and run by test/helpers/redisson.ts)
// against the real org.redisson:redisson jar. Keys arrive on stdin one per line as hex of their
// UTF-16 code units (so lone surrogates, newlines and empty keys survive the pipe).
//
// Offline modes (no Redis):
//   hash                      per key: StringCodec bytes (hex), then Hash.hash128 as two signed longs
//   indexes                   per "size k h0 h1" line: the filter's k bit indexes (its private index routine)
//   sizing                    per "n p" line: size, hash iterations (its private sizing) and Double.toString(p)
// Redis modes (ADDR = host:port, or several comma-separated cluster nodes with --cluster):
//   init ADDR NAME N P        tryInit(N, P); prints true/false
//   add ADDR NAME             add(key) per key; prints one 0/1 per key
//   addall ADDR NAME          add(all keys) once; prints the count it returns
//   contains ADDR NAME        contains(key) per key; prints one 0/1 per key
//   count ADDR NAME           count()
//   config ADDR NAME          size, hashIterations, expectedInsertions, falseProbability
// A Redisson exception prints "ERR <class> <message>" and exits 3.
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.objenesis.ObjenesisStd;
import org.redisson.Redisson;
import org.redisson.RedissonBloomFilter;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.misc.Hash;

public final class RedissonHarness {
  public static void main(String[] args) throws Exception {
    boolean cluster = false;
    List<String> pos = new ArrayList<>();
    for (String a : args) {
      if (a.equals("--cluster")) cluster = true;
      else pos.add(a);
    }
    PrintStream out = new PrintStream(System.out, false, "UTF-8");
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
    String mode = pos.get(0);
    switch (mode) {
      case "hash": {
        String line;
        while ((line = in.readLine()) != null) {
          ByteBuf b = StringCodec.INSTANCE.getValueEncoder().encode(decode(line));
          long[] h = Hash.hash128(b);
          out.println(ByteBufUtil.hexDump(b) + " " + h[0] + " " + h[1]);
          b.release();
        }
        break;
      }
      case "hashbytes": {
        String line;
        while ((line = in.readLine()) != null) {
          long[] h = Hash.hash128(Unpooled.wrappedBuffer(ByteBufUtil.decodeHexDump(line)));
          out.println(h[0] + " " + h[1]);
        }
        break;
      }
      case "indexes": {
        Object f = new ObjenesisStd().newInstance(RedissonBloomFilter.class);
        Method m = RedissonBloomFilter.class.getDeclaredMethod("hash", long.class, long.class, int.class, long.class);
        m.setAccessible(true);
        String line;
        while ((line = in.readLine()) != null) {
          String[] p = line.split(" ");
          long size = Long.parseLong(p[0]);
          int k = Integer.parseInt(p[1]);
          long[] idx = (long[]) m.invoke(f, Long.parseLong(p[2]), Long.parseLong(p[3]), k, size);
          StringBuilder sb = new StringBuilder();
          for (int i = 0; i < idx.length; i++) sb.append(i == 0 ? "" : " ").append(idx[i]);
          out.println(sb);
        }
        break;
      }
      case "sizing": {
        Object f = new ObjenesisStd().newInstance(RedissonBloomFilter.class);
        Method bits = RedissonBloomFilter.class.getDeclaredMethod("optimalNumOfBits", long.class, double.class);
        Method hashes = RedissonBloomFilter.class.getDeclaredMethod("optimalNumOfHashFunctions", long.class, long.class);
        bits.setAccessible(true);
        hashes.setAccessible(true);
        String line;
        while ((line = in.readLine()) != null) {
          String[] p = line.split(" ");
          long n = Long.parseLong(p[0]);
          double fpp = Double.parseDouble(p[1]);
          long size = (Long) bits.invoke(f, n, fpp);
          int k = size == 0 ? 0 : (Integer) hashes.invoke(f, n, size);
          out.println(size + " " + k + " " + Double.toString(fpp));
        }
        break;
      }
      default:
        redisMode(mode, pos, cluster, in, out);
    }
    out.flush();
  }

  private static void redisMode(String mode, List<String> pos, boolean cluster, BufferedReader in, PrintStream out) throws Exception {
    Config cfg = new Config();
    if (cluster) {
      String[] nodes = pos.get(1).split(",");
      for (int i = 0; i < nodes.length; i++) nodes[i] = "redis://" + nodes[i];
      cfg.useClusterServers().addNodeAddress(nodes).setMasterConnectionMinimumIdleSize(1).setSlaveConnectionMinimumIdleSize(1);
    } else {
      cfg.useSingleServer().setAddress("redis://" + pos.get(1)).setConnectionMinimumIdleSize(1).setConnectionPoolSize(4)
          .setSubscriptionConnectionMinimumIdleSize(0);
    }
    RedissonClient r = Redisson.create(cfg);
    try {
      RBloomFilter<String> f = r.getBloomFilter(pos.get(2), StringCodec.INSTANCE);
      switch (mode) {
        case "init":
          out.println(f.tryInit(Long.parseLong(pos.get(3)), Double.parseDouble(pos.get(4))));
          break;
        case "add":
        case "contains": {
          StringBuilder sb = new StringBuilder();
          String line;
          while ((line = in.readLine()) != null) {
            String key = decode(line);
            boolean b = mode.equals("add") ? f.add(key) : f.contains(key);
            sb.append(b ? '1' : '0');
          }
          out.println(sb);
          break;
        }
        case "addall": {
          List<String> keys = new ArrayList<>();
          String line;
          while ((line = in.readLine()) != null) keys.add(decode(line));
          out.println(f.add(keys));
          break;
        }
        case "count":
          out.println(f.count());
          break;
        case "config":
          out.println(f.getSize() + " " + f.getHashIterations() + " " + f.getExpectedInsertions() + " " + f.getFalseProbability());
          break;
        default:
          throw new IllegalArgumentException("unknown mode " + mode);
      }
    } catch (RuntimeException e) {
      Throwable c = e;
      while (c.getCause() != null && c.getCause() != c) c = c.getCause();
      out.println("ERR " + c.getClass().getName() + " " + c.getMessage());
      out.flush();
      r.shutdown();
      System.exit(3);
    }
    r.shutdown();
  }

  /** Hex of UTF-16 code units, four digits each. */
  private static String decode(String hex) {
    char[] c = new char[hex.length() / 4];
    for (int i = 0; i < c.length; i++) c[i] = (char) Integer.parseInt(hex.substring(4 * i, 4 * i + 4), 16);
    return new String(c);
  }
}
