import re, sys
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
# kernel<<<cfg>>>(args);  ->  emu::launch4(cfg, [&] { kernel(args); });
pat = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>]*>)?)<<<(.*?)>>>\((.*?)\);', re.S)
n = len(pat.findall(s))
s = pat.sub(lambda m: 'emu::launch4(%s, [&] { %s(%s); });' % (m.group(2), m.group(1), m.group(3)), s)
open(dst, 'w').write('#include "emu.h"\n' + s)
print(src, n, "launches")
