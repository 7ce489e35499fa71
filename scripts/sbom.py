#!/usr/bin/env python3
"""CycloneDX 1.5 SBOMs of turnstile, from `cargo metadata` and Cargo.lock (and, for the image, the
dpkg entries of the runtime file system). Standard library only: it runs in the Containerfile's
builder stage (rust:*-bookworm has python3) as well as in CI. An equivalent of `cargo cyclonedx`
without building it (docs/supply-chain.md, "SBOM").

  sbom.py rust  --output F            every package of Cargo.lock: the crates compiled into the
                                      release binary have scope "required", the others (dev
                                      dependencies, feature `harness`, other platforms' crates,
                                      build-only crates) "excluded", with a property saying which
  sbom.py image --rootfs D --output F what the image ships: the Debian packages whose dpkg entries
                                      D/var/lib/dpkg/status.d/ holds (pkg:deb purls, distro from
                                      D/etc/os-release), the crates compiled into the binary, and
                                      the librdkafka that rdkafka-sys bundles and links statically
  sbom.py check-rust F                F names every Cargo.lock package (name, version, purl, the
                                      lock file's SHA-256) and is well formed; exit 1 otherwise
  sbom.py check-image F --rootfs D    F names every dpkg entry of D with its version, and the
                                      shipped crates; exit 1 otherwise

Output is deterministic for the same inputs (serial number derived from the content; timestamp
from SOURCE_DATE_EPOCH when set).
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
import urllib.parse
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC_VERSION = "1.5"
TOOL = {"type": "application", "name": "turnstile scripts/sbom.py", "version": "1"}


def die(msg):
    print(f"sbom: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def cargo_metadata(manifest, *extra):
    base = ["cargo", "metadata", "--format-version", "1", "--locked", "--manifest-path", manifest, *extra]
    for offline in (["--offline"], []):
        p = subprocess.run(base + offline, capture_output=True, text=True)
        if p.returncode == 0:
            return json.loads(p.stdout)
    die(f"`{' '.join(base)}` failed: {p.stderr.strip()[-600:]} "
        "(Cargo.lock out of date: run cargo update; crates missing: cargo fetch --locked)")


def host_triple():
    out = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return re.search(r"^host: (\S+)$", out, re.M).group(1)


def lock_packages(manifest):
    lock = os.path.join(os.path.dirname(os.path.abspath(manifest)), "Cargo.lock")
    try:
        with open(lock, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        die(f"cannot read {lock}: {e}")
    return {(p["name"], p["version"]): p for p in data.get("package", [])}


def cargo_purl(name, version):
    return f"pkg:cargo/{name}@{urllib.parse.quote(version, safe='.-_~')}"


def licenses_of(pkg):
    lic = pkg.get("license")
    if lic:
        # Old crates write "MIT/Apache-2.0"; SPDX says "MIT OR Apache-2.0".
        return [{"expression": re.sub(r"\s*/\s*", " OR ", lic.strip())}]
    if pkg.get("license_file"):
        return [{"license": {"name": f"see {pkg['license_file']} in the crate"}}]
    return []


def shipped_ids(meta):
    """Package ids reachable from the root through normal dependencies only: what the binary
    links (for the metadata's platform and features)."""
    root = meta["resolve"]["root"]
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    seen, stack = {root}, [root]
    while stack:
        for dep in nodes[stack.pop()]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                stack.append(dep["pkg"])
    seen.discard(root)
    return seen


def crate_component(pkg, lock, scope=None, reason=None):
    name, version = pkg["name"], pkg["version"]
    c = {
        "type": "library",
        "bom-ref": cargo_purl(name, version),
        "name": name,
        "version": version,
        "purl": cargo_purl(name, version),
    }
    if pkg.get("description"):
        c["description"] = " ".join(pkg["description"].split())
    if scope:
        c["scope"] = scope
    lic = licenses_of(pkg)
    if lic:
        c["licenses"] = lic
    checksum = lock.get((name, version), {}).get("checksum")
    if checksum:
        c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
    refs = []
    if pkg.get("repository"):
        refs.append({"type": "vcs", "url": pkg["repository"]})
    if (pkg.get("source") or "").startswith("registry+https://github.com/rust-lang/crates.io-index"):
        refs.append({"type": "distribution",
                     "url": f"https://crates.io/api/v1/crates/{name}/{version}/download"})
    if refs:
        c["externalReferences"] = refs
    if reason:
        c["properties"] = [{"name": "turnstile:not-shipped", "value": reason}]
    return c


def librdkafka_component(rdkafka_sys):
    """rdkafka-sys builds its bundled librdkafka (version after the '+') and links it statically."""
    if "+" not in rdkafka_sys["version"]:
        return None
    v = rdkafka_sys["version"].split("+", 1)[1]
    return {
        "type": "library",
        "bom-ref": f"pkg:generic/librdkafka@{v}",
        "name": "librdkafka",
        "version": v,
        "purl": f"pkg:generic/librdkafka@{v}",
        "cpe": f"cpe:2.3:a:confluent:librdkafka:{v}:*:*:*:*:*:*:*",
        "licenses": [{"expression": "BSD-2-Clause"}],
        "description": "bundled by the rdkafka-sys crate, compiled from source and linked statically into turnstile",
        "externalReferences": [{"type": "vcs", "url": "https://github.com/confluentinc/librdkafka"}],
    }


def root_component(meta, kind="application"):
    root_id = meta["resolve"]["root"]
    root = next(p for p in meta["packages"] if p["id"] == root_id)
    c = {
        "type": kind,
        "bom-ref": cargo_purl(root["name"], root["version"]),
        "name": root["name"],
        "version": root["version"],
        "purl": cargo_purl(root["name"], root["version"]),
        "licenses": licenses_of(root),
    }
    if root.get("description"):
        c["description"] = " ".join(root["description"].split())
    return root, c


def bom(meta_component, components, dependencies, seed):
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    ts = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
          else datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "turnstile-sbom:" + hashlib.sha256(seed.encode()).hexdigest())
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {"timestamp": ts, "tools": {"components": [TOOL]}, "component": meta_component},
        "components": components,
        "dependencies": dependencies,
    }


def write(doc, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")


def dependency_graph(meta, refs):
    """CycloneDX dependencies among the components present (refs: package id -> bom-ref)."""
    out = []
    for n in sorted(meta["resolve"]["nodes"], key=lambda n: refs.get(n["id"], "")):
        if n["id"] not in refs:
            continue
        deps = sorted({refs[d["pkg"]] for d in n["deps"] if d["pkg"] in refs})
        out.append({"ref": refs[n["id"]], "dependsOn": deps})
    return out


# -- rust: every Cargo.lock package ---------------------------------------------------------------
def cmd_rust(args):
    manifest = args.manifest_path
    lock = lock_packages(manifest)
    full = cargo_metadata(manifest, "--all-features")
    shipped_meta = cargo_metadata(manifest, "--filter-platform", args.target or host_triple())
    shipped = {(p["name"], p["version"]) for p in shipped_meta["packages"]
               if p["id"] in shipped_ids(shipped_meta)}
    root, meta_c = root_component(full)
    comps, refs, rdkafka = [], {full["resolve"]["root"]: meta_c["bom-ref"]}, None
    for p in sorted(full["packages"], key=lambda p: (p["name"], p["version"])):
        if p["id"] == full["resolve"]["root"]:
            continue
        key = (p["name"], p["version"])
        reason = None if key in shipped else (
            "not compiled into the release binary for " + (args.target or host_triple())
            + ": a dev dependency, a build-only crate, an optional feature (harness) or another platform's crate")
        comps.append(crate_component(p, lock, "required" if key in shipped else "excluded", reason))
        refs[p["id"]] = comps[-1]["bom-ref"]
        if p["name"] == "rdkafka-sys" and key in shipped:
            rdkafka = p
    deps = dependency_graph(full, refs)
    lib = librdkafka_component(rdkafka) if rdkafka else None
    if lib:
        lib["scope"] = "required"
        comps.append(lib)
        for d in deps:
            if d["ref"] == cargo_purl(rdkafka["name"], rdkafka["version"]):
                d["dependsOn"].append(lib["bom-ref"])
        deps.append({"ref": lib["bom-ref"], "dependsOn": []})
    with open(os.path.join(os.path.dirname(os.path.abspath(manifest)), "Cargo.lock"), "rb") as f:
        seed = f.read().decode()
    write(bom(meta_c, comps, deps, seed), args.output)
    n_req = sum(1 for c in comps if c.get("scope") == "required")
    print(f"sbom: {args.output}: {len(comps)} components ({n_req} compiled into the binary), "
          f"Cargo.lock has {len(lock)} packages")


# -- image: dpkg entries of the rootfs + shipped crates -------------------------------------------
def parse_deb822(text):
    entries, cur, last = [], {}, None
    for line in text.splitlines():
        if not line.strip():
            if cur:
                entries.append(cur)
            cur, last = {}, None
        elif line[0] in " \t" and last:
            cur[last] += "\n" + line
        elif ":" in line:
            last, _, v = line.partition(":")
            cur[last] = v.strip()
    if cur:
        entries.append(cur)
    return entries


def os_release(rootfs):
    for p in ("etc/os-release", "usr/lib/os-release"):
        path = os.path.join(rootfs, p)
        if os.path.exists(path):
            vals = {}
            for line in open(path):
                k, _, v = line.strip().partition("=")
                if k:
                    vals[k] = v.strip('"')
            return vals
    die(f"no etc/os-release in {rootfs}: scanners cannot tell the distribution (scripts/image-rootfs.sh copies it)")


def dpkg_entries(rootfs):
    d = os.path.join(rootfs, "var/lib/dpkg/status.d")
    if not os.path.isdir(d):
        die(f"no {d}: scripts/image-rootfs.sh writes the dpkg entries of the shipped packages there")
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".md5sums"):
            continue
        for e in parse_deb822(open(os.path.join(d, name)).read()):
            out.append(e)
    if not out:
        die(f"{d} holds no dpkg entry")
    return out


def deb_component(e, distro):
    name, version, arch = e["Package"], e["Version"], e.get("Architecture", "")
    src = e.get("Source", "")
    q = urllib.parse.quote
    purl = f"pkg:deb/debian/{name}@{q(version, safe='.-_~')}?arch={arch}&distro={distro}"
    c = {"type": "library", "bom-ref": purl, "name": name, "version": version, "purl": purl,
         "publisher": e.get("Maintainer", "")}
    props = []
    if src:
        m = re.match(r"(\S+)(?: \((.*)\))?", src)
        props.append({"name": "turnstile:deb:source", "value": m.group(1)})
        if m.group(2):
            props.append({"name": "turnstile:deb:source-version", "value": m.group(2)})
    props.append({"name": "turnstile:deb:license-file", "value": f"/usr/share/doc/{name}/copyright"})
    c["properties"] = props
    return c


def cmd_image(args):
    rootfs = args.rootfs
    rel = os_release(rootfs)
    distro = f"{rel.get('ID', 'debian')}-{rel.get('VERSION_ID', '')}"
    debs = [deb_component(e, distro) for e in dpkg_entries(rootfs)]
    lock = lock_packages(args.manifest_path)
    meta = cargo_metadata(args.manifest_path, "--filter-platform", args.target or host_triple())
    ids = shipped_ids(meta)
    root, app = root_component(meta)
    crates, refs, rdkafka = [], {meta["resolve"]["root"]: app["bom-ref"]}, None
    for p in sorted(meta["packages"], key=lambda p: (p["name"], p["version"])):
        if p["id"] in ids:
            crates.append(crate_component(p, lock, "required"))
            refs[p["id"]] = crates[-1]["bom-ref"]
            if p["name"] == "rdkafka-sys":
                rdkafka = p
    deps = dependency_graph(meta, refs)
    extra = [c for c in [librdkafka_component(rdkafka) if rdkafka else None] if c]
    for c in extra:
        for d in deps:
            if rdkafka and d["ref"] == cargo_purl(rdkafka["name"], rdkafka["version"]):
                d["dependsOn"].append(c["bom-ref"])
        deps.append({"ref": c["bom-ref"], "dependsOn": []})
    # The binary links the Debian libraries dynamically.
    for d in deps:
        if d["ref"] == app["bom-ref"]:
            d["dependsOn"] = sorted(set(d["dependsOn"]) | {c["bom-ref"] for c in debs})
    for c in debs:
        deps.append({"ref": c["bom-ref"], "dependsOn": []})
    meta_c = {"type": "container", "bom-ref": "turnstile-image", "name": "turnstile",
              "version": os.environ.get("TURNSTILE_IMAGE_VERSION", root["version"]),
              "licenses": app["licenses"],
              "properties": [{"name": "turnstile:os", "value": rel.get("PRETTY_NAME", distro)}]}
    comps = [app] + debs + crates + extra
    deps.insert(0, {"ref": "turnstile-image", "dependsOn": [app["bom-ref"]]})
    seed = json.dumps([c["purl"] for c in comps if "purl" in c])
    write(bom(meta_c, comps, deps, seed), args.output)
    print(f"sbom: {args.output}: {len(debs)} Debian packages "
          f"({', '.join(c['name'] + ' ' + c['version'] for c in debs)}), "
          f"{len(crates)} crates, {len(extra)} bundled C libraries")


# -- checks ---------------------------------------------------------------------------------------
def load_checked(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        die(f"{path} is not readable JSON: {e}")
    errs = []
    if doc.get("bomFormat") != "CycloneDX":
        errs.append(f"bomFormat is {doc.get('bomFormat')!r}, not 'CycloneDX'")
    if doc.get("specVersion") != SPEC_VERSION:
        errs.append(f"specVersion is {doc.get('specVersion')!r}, not {SPEC_VERSION!r}")
    if not re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", str(doc.get("serialNumber", ""))):
        errs.append("serialNumber is not a urn:uuid")
    comps = doc.get("components")
    if not isinstance(comps, list) or not comps:
        errs.append("no components")
        comps = []
    refs = [c.get("bom-ref") for c in comps]
    dup = {r for r in refs if refs.count(r) > 1}
    if dup:
        errs.append(f"duplicate bom-refs: {sorted(dup)[:5]}")
    known = set(refs) | {doc.get("metadata", {}).get("component", {}).get("bom-ref")}
    for d in doc.get("dependencies", []):
        bad = [r for r in [d.get("ref")] + d.get("dependsOn", []) if r not in known]
        if bad:
            errs.append(f"dependency refs without a component: {bad[:5]}")
            break
    for c in comps:
        if not c.get("name") or not c.get("version"):
            errs.append(f"a component without name or version: {c}")
            break
    return doc, comps, errs


def report(path, errs, ok_msg):
    if errs:
        for e in errs[:40]:
            print(f"sbom: {path}: {e}", file=sys.stderr)
        die(f"{path}: {len(errs)} problem(s) above (regenerate it: bash scripts/sbom.sh)")
    print(f"sbom: ok: {path}: {ok_msg}")


def cmd_check_rust(args):
    doc, comps, errs = load_checked(args.file)
    lock = lock_packages(args.manifest_path)
    by_key = {(c.get("name"), c.get("version")): c for c in comps}
    root = doc.get("metadata", {}).get("component", {})
    for (name, version), p in sorted(lock.items()):
        if (name, version) == (root.get("name"), root.get("version")):
            continue
        c = by_key.get((name, version))
        if c is None:
            errs.append(f"Cargo.lock package {name} {version} is missing")
            continue
        if c.get("purl") != cargo_purl(name, version):
            errs.append(f"{name} {version}: purl {c.get('purl')!r}, expected {cargo_purl(name, version)!r}")
        want = p.get("checksum")
        got = [h.get("content") for h in c.get("hashes", []) if h.get("alg") == "SHA-256"]
        if want and got != [want]:
            errs.append(f"{name} {version}: SHA-256 {got}, Cargo.lock says {want}")
        if not c.get("licenses"):
            errs.append(f"{name} {version}: no licence")
        if c.get("scope") not in ("required", "excluded"):
            errs.append(f"{name} {version}: scope {c.get('scope')!r}")
    extra = [k for k in by_key if k not in lock and not k[0] == "librdkafka"]
    if extra:
        errs.append(f"components not in Cargo.lock: {extra[:5]}")
    if root.get("name") != "turnstile" or root.get("licenses") != [{"expression": "Apache-2.0"}]:
        errs.append(f"metadata.component is not turnstile under Apache-2.0: {root}")
    required_comps = [c for c in comps if c.get("scope") == "required"]
    required = {c["name"] for c in required_comps}
    for must in ("openssl-sys", "rdkafka-sys", "tokio", "librdkafka"):
        if must not in required:
            errs.append(f"{must} is not marked as compiled into the binary (scope required)")
    if "proptest" in required:
        errs.append("proptest (a dev dependency) is marked as compiled into the binary")
    report(args.file, errs, f"CycloneDX {SPEC_VERSION}, all {len(lock)} Cargo.lock packages "
           f"(with purl, licence and SHA-256), {len(required_comps)} in the release binary's graph")


def cmd_check_image(args):
    doc, comps, errs = load_checked(args.file)
    debs = dpkg_entries(args.rootfs)
    by_name = {c.get("name"): c for c in comps if str(c.get("purl", "")).startswith("pkg:deb/")}
    for e in debs:
        c = by_name.get(e["Package"])
        if c is None:
            errs.append(f"Debian package {e['Package']} (status.d) is missing")
        elif c.get("version") != e["Version"]:
            errs.append(f"{e['Package']}: version {c.get('version')}, status.d says {e['Version']}")
    extra = set(by_name) - {e["Package"] for e in debs}
    if extra:
        errs.append(f"Debian packages without a status.d entry: {sorted(extra)}")
    names = {c.get("name") for c in comps}
    for must in ("turnstile", "openssl-sys", "rdkafka-sys", "librdkafka"):
        if must not in names:
            errs.append(f"{must} is missing")
    if "proptest" in names:
        errs.append("proptest (a dev dependency) is listed as shipped")
    report(args.file, errs, f"CycloneDX {SPEC_VERSION}, {len(debs)} Debian packages as in status.d, "
           f"{len(comps) - len(debs)} other components")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest-path", default=os.path.join(REPO, "Cargo.toml"))
    ap.add_argument("--target", help="the target triple of the release binary (default: rustc's host)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("rust")
    s.add_argument("--output", required=True)
    s = sub.add_parser("image")
    s.add_argument("--rootfs", required=True)
    s.add_argument("--output", required=True)
    s = sub.add_parser("check-rust")
    s.add_argument("file")
    s = sub.add_parser("check-image")
    s.add_argument("file")
    s.add_argument("--rootfs", required=True)
    args = ap.parse_args()
    {"rust": cmd_rust, "image": cmd_image, "check-rust": cmd_check_rust,
     "check-image": cmd_check_image}[args.cmd](args)


if __name__ == "__main__":
    main()
