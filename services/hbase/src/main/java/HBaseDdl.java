import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * Table administration for hashgate's HBase tables. The Node client (hbase-rpc-client) speaks only
 * the data protocol, so schema work goes through HBase's own Admin API here.
 *
 * <pre>
 * HBaseDdl create TABLE -f FAMILY[:versions=N][,ttl=SECONDS][,bloom=NONE|ROW|ROWCOL] [-f ...]
 *                       [-s SPLIT1,SPLIT2,...] [--replace | --if-not-exists]
 * HBaseDdl drop TABLE          (no error if it does not exist)
 * HBaseDdl exists TABLE        (prints true/false)
 * HBaseDdl describe TABLE      (prints families with versions/ttl/bloom, then region count)
 * HBaseDdl flush TABLE
 * HBaseDdl compact TABLE       (major compaction, waits until it finishes)
 * HBaseDdl probe               (put + get round trip through table hashgate_probe)
 * HBaseDdl batch               (reads the commands above from stdin, one per line, in one JVM)
 * </pre>
 *
 * Split keys go through Bytes.toBytesBinary, so binary salts can be written as \x00.
 * Connection: hbase-site.xml on the classpath, overridden by env HBASE_ZK_QUORUM / HBASE_ZK_PORT.
 * Each command prints one line starting with "OK " (or "ERR " and exit code 1).
 */
public final class HBaseDdl {
  private HBaseDdl() {}

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      System.err.println("usage: HBaseDdl create|drop|exists|describe|flush|compact|probe|batch ...");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    String quorum = System.getenv("HBASE_ZK_QUORUM");
    String port = System.getenv("HBASE_ZK_PORT");
    if (quorum != null && !quorum.isEmpty()) conf.set("hbase.zookeeper.quorum", quorum);
    if (port != null && !port.isEmpty()) conf.set("hbase.zookeeper.property.clientPort", port);
    // fail in seconds, not the client's default of minutes, when the server is down
    conf.setIfUnset("hbase.client.retries.number", "7");
    conf.setIfUnset("hbase.client.pause", "200");
    conf.setIfUnset("zookeeper.recovery.retry", "2");
    int failures = 0;
    // The connection is never closed: closing waits ~2.5 s for Netty's graceful shutdown, longer
    // than most commands take. Every command is synchronous, so halting after the output is
    // flushed loses nothing.
    Connection c = ConnectionFactory.createConnection(conf);
    Admin admin = c.getAdmin();
    if (args[0].equals("batch")) {
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null; ) {
        line = line.trim();
        if (line.isEmpty() || line.startsWith("#")) continue;
        if (!run(c, admin, line.split("\\s+"))) failures++;
      }
    } else if (!run(c, admin, args)) {
      failures++;
    }
    System.out.flush();
    System.err.flush();
    Runtime.getRuntime().halt(failures == 0 ? 0 : 1);
  }

  private static boolean run(Connection c, Admin admin, String[] a) {
    try {
      String out = dispatch(c, admin, a);
      System.out.println("OK " + a[0] + (out.isEmpty() ? "" : " " + out));
      return true;
    } catch (Exception e) {
      System.out.println("ERR " + String.join(" ", a) + ": " + e.getClass().getSimpleName() + ": " + e.getMessage());
      return false;
    }
  }

  private static String dispatch(Connection c, Admin admin, String[] a) throws Exception {
    switch (a[0]) {
      case "create": return create(admin, a);
      case "drop": {
        TableName tn = table(a);
        if (!admin.tableExists(tn)) return a[1] + " absent";
        if (admin.isTableEnabled(tn)) admin.disableTable(tn);
        admin.deleteTable(tn);
        return a[1];
      }
      case "exists": return String.valueOf(admin.tableExists(table(a)));
      case "describe": {
        TableName tn = table(a);
        TableDescriptor td = admin.getDescriptor(tn);
        StringBuilder sb = new StringBuilder(a[1]);
        for (var cf : td.getColumnFamilies()) {
          sb.append(' ').append(cf.getNameAsString()).append(":versions=").append(cf.getMaxVersions())
              .append(",ttl=").append(cf.getTimeToLive()).append(",bloom=").append(cf.getBloomFilterType());
        }
        sb.append(" regions=").append(admin.getRegions(tn).size());
        return sb.toString();
      }
      case "flush": admin.flush(table(a)); return a[1];
      case "compact": {
        TableName tn = table(a);
        admin.flush(tn);
        admin.majorCompact(tn);
        // majorCompact only queues the request; wait for it so callers can read the result
        long deadline = System.currentTimeMillis() + 60_000;
        Thread.sleep(200);
        while (admin.getCompactionState(tn) != CompactionState.NONE) {
          if (System.currentTimeMillis() > deadline) throw new IllegalStateException("compaction still running after 60 s");
          Thread.sleep(100);
        }
        return a[1];
      }
      case "probe": return probe(c, admin);
      default: throw new IllegalArgumentException("unknown command " + a[0]);
    }
  }

  private static TableName table(String[] a) {
    if (a.length < 2) throw new IllegalArgumentException(a[0] + " needs a table name");
    return TableName.valueOf(a[1]);
  }

  private static String create(Admin admin, String[] a) throws Exception {
    TableName tn = table(a);
    TableDescriptorBuilder tb = TableDescriptorBuilder.newBuilder(tn);
    byte[][] splits = null;
    boolean replace = false;
    boolean ifNotExists = false;
    int families = 0;
    for (int i = 2; i < a.length; i++) {
      switch (a[i]) {
        case "-f": tb.setColumnFamily(family(arg(a, ++i))); families++; break;
        case "-s": splits = Arrays.stream(arg(a, ++i).split(",")).map(Bytes::toBytesBinary).toArray(byte[][]::new); break;
        case "--replace": replace = true; break;
        case "--if-not-exists": ifNotExists = true; break;
        default: throw new IllegalArgumentException("unexpected argument " + a[i]);
      }
    }
    if (families == 0) throw new IllegalArgumentException("create needs at least one -f FAMILY");
    if (admin.tableExists(tn)) {
      if (ifNotExists) return a[1] + " exists";
      if (!replace) throw new IllegalStateException("table " + a[1] + " exists (use --replace)");
      if (admin.isTableEnabled(tn)) admin.disableTable(tn);
      admin.deleteTable(tn);
    }
    if (splits != null) admin.createTable(tb.build(), splits);
    else admin.createTable(tb.build());
    return a[1];
  }

  private static String arg(String[] a, int i) {
    if (i >= a.length) throw new IllegalArgumentException(a[i - 1] + " needs a value");
    return a[i];
  }

  /** FAMILY[:versions=N,ttl=SECONDS,bloom=ROW] */
  private static ColumnFamilyDescriptor family(String spec) {
    int colon = spec.indexOf(':');
    String name = colon < 0 ? spec : spec.substring(0, colon);
    ColumnFamilyDescriptorBuilder b = ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes(name));
    if (colon >= 0) {
      for (String kv : spec.substring(colon + 1).split(",")) {
        String[] p = kv.split("=", 2);
        if (p.length != 2) throw new IllegalArgumentException("bad family option " + kv + " in " + spec);
        switch (p[0]) {
          case "versions": b.setMaxVersions(Integer.parseInt(p[1])); break;
          case "ttl": b.setTimeToLive(Integer.parseInt(p[1])); break;
          case "bloom": b.setBloomFilterType(BloomType.valueOf(p[1].toUpperCase())); break;
          default: throw new IllegalArgumentException("unknown family option " + p[0] + " in " + spec);
        }
      }
    }
    return b.build();
  }

  private static String probe(Connection c, Admin admin) throws Exception {
    TableName tn = TableName.valueOf("hashgate_probe");
    if (!admin.tableExists(tn)) {
      admin.createTable(TableDescriptorBuilder.newBuilder(tn)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.of("p")).build());
    }
    byte[] row = Bytes.toBytes("probe-" + System.nanoTime());
    byte[] value = Bytes.toBytes("v" + System.currentTimeMillis());
    try (Table t = c.getTable(tn)) {
      t.put(new Put(row).addColumn(Bytes.toBytes("p"), Bytes.toBytes("q"), value));
      Result r = t.get(new Get(row));
      byte[] got = r.getValue(Bytes.toBytes("p"), Bytes.toBytes("q"));
      if (!Arrays.equals(got, value)) throw new IllegalStateException("probe read back a different value");
    }
    return "put/get round trip";
  }
}
