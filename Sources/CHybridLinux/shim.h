// Linux calls that Swift's Glibc module leaves out: for the relay dispatcher's accepting thread,
// and for starting child processes (ChildSpawn).
#if defined(__linux__)
#include <sys/epoll.h>
#include <sys/socket.h>
// A GNU extension: declared by <sys/socket.h> only under _GNU_SOURCE, which the Glibc module
// was built without. Same signature as glibc's (accept with flags: SOCK_CLOEXEC, SOCK_NONBLOCK).
extern int accept4(int fd, struct sockaddr *address, socklen_t *address_length, int flags);

#include <spawn.h>
// glibc 2.34 and later: close every descriptor from `from` on in a posix_spawn child (what
// Foundation's Process emulates by listing /proc/self/fd). Declared by <spawn.h> only under
// _GNU_SOURCE/__USE_MISC builds the Glibc module does not use.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

#include <unistd.h>
// A pipe whose ends are made with flags (O_CLOEXEC) in one call: no moment at which a program
// started meanwhile inherits them. Declared by <unistd.h> only under _GNU_SOURCE.
extern int pipe2(int fds[2], int flags);
#endif
