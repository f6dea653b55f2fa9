//===- comm_error.h - How the comm layer's C++ API fails --------*- C++ -*-===//
//
// Everything in the comm layer that a user or a peer can break (an
// environment variable, a port, a rank that died, mismatched collectives)
// throws CommError with one sentence naming what went wrong and where. The C
// ABI of comm.h turns it into a return code and tessera_comm_last_error();
// the driver turns it into "<program>: error: ..." and a non-zero exit.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_ERROR_H
#define TESSERA_RUNTIME_COMM_ERROR_H

#include <stdexcept>

namespace tessera::comm {

class CommError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_ERROR_H
