// Linux calls that Swift's Glibc module leaves out, for the relay dispatcher's accepting thread.
#if defined(__linux__)
#include <sys/epoll.h>
#include <sys/socket.h>
// A GNU extension: declared by <sys/socket.h> only under _GNU_SOURCE, which the Glibc module
// was built without. Same signature as glibc's (accept with flags: SOCK_CLOEXEC, SOCK_NONBLOCK).
extern int accept4(int fd, struct sockaddr *address, socklen_t *address_length, int flags);
#endif
