#!/usr/bin/env python3
"""Makes DejaVuSans-subset.ttf from DejaVu Sans (fonts-dejavu-core 2.37).

Keeps the outlines of ASCII, Latin-1, Greek and a few mathematical signs
(plus the components of composite glyphs) and empties every other glyph, so
glyph ids, metrics and kerning stay valid; the cmap maps only the kept
characters (others show the .notdef box); drops the OpenType layout tables
(GPOS, GSUB, GDEF, MATH), FFTM and the glyph names (post v3). Standard
library only. Usage: subset-font.py DejaVuSans.ttf DejaVuSans-subset.ttf
"""
import struct
import sys

KEEP_RANGES = [(0x20, 0x7E), (0xA0, 0xFF), (0x391, 0x3C9)]
KEEP_EXTRA = [0x2013, 0x2014, 0x2022, 0x2026, 0x2032, 0x2192, 0x2212, 0x221E, 0x2248, 0x2264, 0x2265, 0xFFFD]
DROP = {b"GPOS", b"GSUB", b"GDEF", b"MATH", b"FFTM"}


def tables(font):
    n = struct.unpack(">H", font[4:6])[0]
    out = {}
    for i in range(n):
        tag, _, off, length = struct.unpack(">4sIII", font[12 + 16 * i : 28 + 16 * i])
        out[tag] = font[off : off + length]
    return out


def cmap_glyphs(cmap, wanted):
    """Glyph ids of the wanted code points, from the format 4 (BMP) subtable."""
    n = struct.unpack(">H", cmap[2:4])[0]
    for i in range(n):
        pid, eid, off = struct.unpack(">HHI", cmap[4 + 8 * i : 12 + 8 * i])
        if (pid, eid) == (3, 1):
            sub = cmap[off:]
            break
    else:
        raise SystemExit("no (3,1) cmap subtable")
    assert struct.unpack(">H", sub[0:2])[0] == 4
    segx2 = struct.unpack(">H", sub[6:8])[0]
    seg = segx2 // 2
    ends = struct.unpack(">%dH" % seg, sub[14 : 14 + segx2])
    starts = struct.unpack(">%dH" % seg, sub[16 + segx2 : 16 + 2 * segx2])
    deltas = struct.unpack(">%dh" % seg, sub[16 + 2 * segx2 : 16 + 3 * segx2])
    ro_pos = 16 + 3 * segx2
    ros = struct.unpack(">%dH" % seg, sub[ro_pos : ro_pos + segx2])
    glyphs = {}
    for cp in wanted:
        for k in range(seg):
            if starts[k] <= cp <= ends[k]:
                if ros[k] == 0:
                    g = (cp + deltas[k]) & 0xFFFF
                else:
                    at = ro_pos + 2 * k + ros[k] + 2 * (cp - starts[k])
                    g = struct.unpack(">H", sub[at : at + 2])[0]
                    if g:
                        g = (g + deltas[k]) & 0xFFFF
                if g:
                    glyphs[cp] = g
                break
    return glyphs


def build_cmap(mapping):
    """A cmap with one format 4 subtable (Windows, BMP) for `mapping` (code point -> glyph)."""
    runs = []
    for cp in sorted(mapping):
        g = mapping[cp]
        if runs and cp == runs[-1][1] + 1 and g == runs[-1][2] + (cp - runs[-1][0]):
            runs[-1][1] = cp
        else:
            runs.append([cp, cp, g])
    segs = [(a, b, (g - a) & 0xFFFF) for a, b, g in runs] + [(0xFFFF, 0xFFFF, 1)]
    n = len(segs)
    es = n.bit_length() - 1
    sub = struct.pack(">HHHHHHH", 4, 16 + 8 * n, 0, 2 * n, 2 * (1 << es), es, 2 * n - 2 * (1 << es))
    sub += struct.pack(">%dH" % n, *[b for _, b, _ in segs]) + b"\0\0"
    sub += struct.pack(">%dH" % n, *[a for a, _, _ in segs])
    sub += struct.pack(">%dH" % n, *[d for _, _, d in segs])
    sub += struct.pack(">%dH" % n, *([0] * n))
    return struct.pack(">HHHHI", 0, 1, 3, 1, 12) + sub


def components(data):
    """Glyph ids referenced by a composite glyph."""
    if len(data) < 10 or struct.unpack(">h", data[0:2])[0] >= 0:
        return []
    out, pos = [], 10
    while True:
        flags, gid = struct.unpack(">HH", data[pos : pos + 4])
        out.append(gid)
        pos += 4 + (4 if flags & 1 else 2)
        if flags & 8:
            pos += 2
        elif flags & 0x40:
            pos += 4
        elif flags & 0x80:
            pos += 8
        if not flags & 0x20:
            return out


def checksum(data):
    data = data + b"\0" * (-len(data) % 4)
    return sum(struct.unpack(">%dI" % (len(data) // 4), data)) & 0xFFFFFFFF


def main(src, dst):
    font = open(src, "rb").read()
    t = tables(font)
    head = bytearray(t[b"head"])
    long_loca = struct.unpack(">h", head[50:52])[0] == 1
    num_glyphs = struct.unpack(">H", t[b"maxp"][4:6])[0]
    fmt = ">%dI" % (num_glyphs + 1) if long_loca else ">%dH" % (num_glyphs + 1)
    loca = struct.unpack(fmt, t[b"loca"])
    if not long_loca:
        loca = [2 * x for x in loca]
    glyf = t[b"glyf"]
    glyph = lambda g: glyf[loca[g] : loca[g + 1]]

    wanted = [cp for lo, hi in KEEP_RANGES for cp in range(lo, hi + 1)] + KEEP_EXTRA
    mapping = cmap_glyphs(t[b"cmap"], wanted)
    keep = {0} | set(mapping.values())
    todo = list(keep)
    while todo:
        for c in components(glyph(todo.pop())):
            if c not in keep:
                keep.add(c)
                todo.append(c)

    new_glyf, offsets = bytearray(), []
    for g in range(num_glyphs):
        offsets.append(len(new_glyf))
        if g in keep:
            new_glyf += glyph(g)
            new_glyf += b"\0" * (-len(new_glyf) % 4)
    offsets.append(len(new_glyf))
    if offsets[-1] <= 2 * 0xFFFF:
        new_loca = struct.pack(">%dH" % len(offsets), *[o // 2 for o in offsets])
        head[50:52] = struct.pack(">h", 0)
    else:
        new_loca = struct.pack(">%dI" % len(offsets), *offsets)
        head[50:52] = struct.pack(">h", 1)
    head[8:12] = b"\0\0\0\0"

    post = bytearray(t[b"post"][:32])
    post[0:4] = struct.pack(">I", 0x00030000)

    t.update({b"cmap": build_cmap(mapping), b"glyf": bytes(new_glyf), b"loca": new_loca, b"head": bytes(head), b"post": bytes(post)})
    for tag in DROP:
        t.pop(tag, None)

    tags = sorted(t)
    n = len(tags)
    es = n.bit_length() - 1
    header = struct.pack(">IHHHH", 0x00010000, n, 16 * (1 << es), es, 16 * n - 16 * (1 << es))
    body, records, off = bytearray(), [], 12 + 16 * n
    for tag in tags:
        data = t[tag]
        records.append(struct.pack(">4sIII", tag, checksum(data), off + len(body), len(data)))
        body += data + b"\0" * (-len(data) % 4)
    out = bytearray(header + b"".join(records) + body)
    adjust = (0xB1B0AFBA - checksum(bytes(out))) & 0xFFFFFFFF
    head_off = 12 + 16 * n + sum(len(t[x]) + (-len(t[x]) % 4) for x in tags[: tags.index(b"head")])
    out[head_off + 8 : head_off + 12] = struct.pack(">I", adjust)
    open(dst, "wb").write(out)
    print("%d of %d glyphs kept, %d -> %d bytes" % (len(keep), num_glyphs, len(font), len(out)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
