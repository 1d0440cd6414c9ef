#!/usr/bin/env bash
# Run the HBaseDdl table tool against the HBase that start.sh runs, e.g.
#   services/hbase/ddl.sh create blacklist -f base:bloom=ROW -f detail -s 1,2,3
#   printf 'drop a\ncreate a -f cf:ttl=2\n' | services/hbase/ddl.sh batch
set -euo pipefail
source "$(dirname "$0")/lib.sh"
hbase_classpath
hbase_ddl "$@"
