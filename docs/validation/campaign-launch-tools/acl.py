"""Give uid 65534 (nobody) rwx on a folder through a POSIX ACL, without setfacl: the kernel's xattr form."""
import os, struct, sys
def acl(entries):
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in entries)
UNDEF = 0xFFFFFFFF
path, uid = sys.argv[1], int(sys.argv[2])
os.setxattr(path, "system.posix_acl_access", acl([(0x01, 7, UNDEF), (0x02, 7, uid), (0x04, 5, UNDEF), (0x10, 7, UNDEF), (0x20, 5, UNDEF)]))
print(oct(os.stat(path).st_mode))
