set -x
ls /usr/bin/g++* /usr/bin/gcc* 2>&1 | head; /opt/gcc/bin/g++ -dumpfullversion; /opt/gcc/bin/g++ -print-file-name=libstdc++_nonshared.a; /opt/gcc/bin/g++ -print-file-name=libstdc++.so
bash tools/gpu/check.sh > /tmp/check.out 2>&1; grep -E "tests/|FAILED|build:|compiler" /tmp/check.out | tail -20
grep -E "^E |Error" $OUT/pytest.log | head -20
