// jemalloc's start-up options for the gpusched binary, read by jemalloc
// before main (only compiled in when the binary is linked with it: see the
// top-level CMakeLists.txt). background_thread: freed pages are returned to
// the kernel by jemalloc's own threads, never inside a request or while a
// request's thread holds the queue mutex. MALLOC_CONF in the environment
// still overrides this.
extern "C" {
// NOLINTNEXTLINE: the name is jemalloc's.
const char* malloc_conf = "background_thread:true";
}
