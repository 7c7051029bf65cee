#!/usr/bin/env bash
# Builds Slurm 24.11.5 from Debian's own source (trixie's orig tarball + trixie-security's
# debian/ with its CVE patches) with bookworm's toolchain, and caches the install prefix
# outside the clone. This gives the tests a second real Slurm that serves REST
# v0.0.40-v0.0.42 and node updates, and a slurmdbd with its MySQL/MariaDB storage plugin.
# ~7.5 min the first time; a no-op afterwards.
source "$(dirname "$0")/common.sh"
need_root

# The MySQL plugin came later: a prefix cached without it is rebuilt.
mysql_plugin="$SLURM_2411_PREFIX/lib/slurm/accounting_storage_mysql.so"
if [ -x "$SLURM_2411_PREFIX/sbin/slurmctld" ] && [ -x "$SLURM_2411_PREFIX/sbin/slurmrestd" ] &&
  [ -x "$SLURM_2411_PREFIX/sbin/slurmdbd" ] && [ -f "$mysql_plugin" ]; then exit 0; fi
"$HARNESS_DIR/deps.sh"

work="$SLURMSCALE_CACHE/build/slurm-$SLURM_2411_VERSION"
rm -rf "$work"
mkdir -p "$work/lists/partial"
cd "$work"

# The signed Sources indexes give us checksums we can trust for files fetched by hand:
# this mirror serves trixie's orig tarball but not its .dsc, and trixie-security's
# debian.tar.xz but not its orig (the same file).
say "fetching the signed trixie source indexes (a private deb-src list; /etc is untouched)"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
archive=$(apt_archive main) security=$(apt_archive security)
cat >sources.list <<EOF
deb-src [signed-by=$keyring] $archive trixie main
deb-src [signed-by=$keyring] $security trixie-security main
EOF
TMPDIR=/var/tmp apt-get -o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists="$work/lists" -o APT::Sandbox::User=root -qq update

# sha256 of $2 as listed for slurm-wlm in the Sources index of suite $1
index_sha256() {
  local idx
  idx=$(ls lists/*_dists_"$1"_main_*Sources*)
  /usr/lib/apt/apt-helper cat-file "$idx" |
    awk -v f="$2" '/^Package: slurm-wlm$/{p=1} /^$/{p=0} p && $3==f && length($1)==64 && !s {s=$1} END{print s}'
}

fetch() { # url, index, file
  local sum
  sum=$(index_sha256 "$2" "$3")
  [ -n "$sum" ] || die "$3 is not listed in the $2 Sources index"
  curl -fsSL -o "$3" "$1/$3" || die "download failed: $1/$3"
  echo "$sum  $3" | sha256sum -c --quiet - || die "checksum mismatch for $3"
}
orig=slurm-wlm_${SLURM_2411_VERSION}.orig.tar.gz
deb=slurm-wlm_${SLURM_2411_VERSION}-4+deb13u1.debian.tar.xz
fetch "$archive/pool/main/s/slurm-wlm" trixie "$orig"
fetch "$security/pool/updates/main/s/slurm-wlm" trixie-security "$deb"

mkdir src
tar -xzf "$orig" -C src --strip-components=1
tar -xJf "$deb" -C src
cd src
# Debian's patches, minus the two that edit configure.ac/Makefile.am (they would need
# autoreconf, and miscellanea-manpages breaks `make` in doc/man without it).
grep -v -E '^\s*(#|$)' debian/patches/series | while read -r p _; do
  case "$p" in rpath | miscellanea-manpages) continue ;; esac
  patch -p1 -s <"debian/patches/$p" || die "patch $p does not apply"
done

say "building Slurm $SLURM_2411_VERSION into $SLURM_2411_PREFIX (~7.5 min on 2 cores)"
# Installed into a staging dir and moved into place at the end, so a harness still running
# on an older prefix keeps its files during the build. configure silently leaves out
# accounting_storage/mysql without mariadb_config (libmariadb-dev): checked below.
{
  ./configure --prefix="$SLURM_2411_PREFIX" --sysconfdir="$SLURM_2411_PREFIX/etc" \
    --disable-debug --enable-multiple-slurmd --with-munge --with-jwt --with-json \
    --with-http-parser --with-yaml --with-lz4 --with-mysql_config=/usr/bin &&
    make -j"$(nproc)" &&
    make install DESTDIR="$work/dest"
} >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; die "Slurm build failed (log: $work/build.log)"; }
[ -f "$work/dest$mysql_plugin" ] ||
  die "the build has no accounting_storage/mysql plugin (is libmariadb-dev installed? log: $work/build.log)"
rm -rf "$SLURM_2411_PREFIX"
mkdir -p "$(dirname "$SLURM_2411_PREFIX")"
mv "$work/dest$SLURM_2411_PREFIX" "$SLURM_2411_PREFIX"
cd / && rm -rf "$work"
say "Slurm $SLURM_2411_VERSION cached at $SLURM_2411_PREFIX"
