#!/bin/sh
# Stand-in for NVIDIA's makeself installer cuda_@CUDA_FULL@_@DRIVER@_linux.run (test bed).
# Like makeself it verifies its payload before doing anything, so a truncated or corrupted
# download fails here. `--silent --toolkit` installs a stand-in /usr/local/cuda-@CUDA@/bin/nvcc.
PAYLOAD_SHA256=@PAYLOAD_SHA256@
PAYLOAD_OFFSET=@PAYLOAD_OFFSET@
silent=0 toolkit=0 driver=0
for arg in "$@"; do
    case "$arg" in
        --silent) silent=1 ;;
        --toolkit) toolkit=1 ;;
        --driver) driver=1 ;;
        --override|--no-opengl-libs|--no-man-page|--no-drm) ;;
        --toolkitpath=*|--installpath=*|--tmpdir=*) ;;
        --check) ;;
        *) echo "Unknown option: $arg" >&2; exit 1 ;;
    esac
done
printf 'Verifying archive integrity... '
actual=$(tail -c +"$PAYLOAD_OFFSET" "$0" | sha256sum | cut -d' ' -f1)
if [ "$actual" != "$PAYLOAD_SHA256" ]; then
    echo "Error in checksums: $actual is different from $PAYLOAD_SHA256"
    echo "The file \"$0\" is corrupt! Please download it again." >&2
    exit 1
fi
echo " 100%   SHA256 checksums are OK. All good."
if [ "$silent" != 1 ]; then
    echo "The stand-in CUDA installer has no interactive mode; use --silent" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "You are attempting to run the installer as non-root. Use sudo." >&2
    exit 1
fi
if [ "$driver" = 1 ]; then
    echo "Installation failed. See log at /var/log/cuda-installer.log for details." >&2
    echo "[ERROR]: stand-in runfile cannot install the driver; use the apt packages" >>/var/log/cuda-installer.log
    exit 1
fi
if [ "$toolkit" = 1 ]; then
    root=/usr/local/cuda-@CUDA@
    mkdir -p "$root/bin" "$root/lib64" "$root/include"
    cat >"$root/bin/nvcc" <<'NVCC'
#!/bin/sh
case "$*" in
    *--version*|*-V*)
        echo "nvcc: NVIDIA (R) Cuda compiler driver"
        echo "Copyright (c) 2005-2024 NVIDIA Corporation"
        echo "Built on Tue_Feb_27_16:19:38_PST_2024"
        echo "Cuda compilation tools, release @CUDA@, V@CUDA@.99"
        echo "Build cuda_@CUDA@.r@CUDA@/compiler.33961263_0" ;;
    *) echo "nvcc fatal   : No input files specified; use option --help for more information"; exit 1 ;;
esac
NVCC
    chmod 0755 "$root/bin/nvcc"
    printf '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n      "version" : "@CUDA_FULL@"\n   }\n}\n' >"$root/version.json"
    : >"$root/lib64/libcudart.so.@CUDA@.99"
    ln -sfn "$root" /usr/local/cuda
    echo "[INFO]: Installed toolkit @CUDA_FULL@ to $root" >>/var/log/cuda-installer.log
    echo "==========="
    echo "= Summary ="
    echo "==========="
    echo ""
    echo "Driver:   Not Selected"
    echo "Toolkit:  Installed in $root/"
    echo ""
    echo "Please make sure that"
    echo " -   PATH includes $root/bin"
    echo " -   LD_LIBRARY_PATH includes $root/lib64, or, add $root/lib64 to /etc/ld.so.conf and run ldconfig as root"
fi
exit 0
