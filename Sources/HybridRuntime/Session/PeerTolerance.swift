/// Where the drivers accept what real peers do although it is not the newest protocol revision.
/// Every rule here is listed in Docs/PROTOCOL-TOLERANCE.md.
enum PeerTolerance {
    /// Whether `error` is the tunnel being closed in an orderly way: a close frame with 1000
    /// (normal closure), 1001 (going away; also what the relay sends when the other side's connection
    /// simply ended) or no status code.
    ///
    /// After the phone has sent its response this ends the transaction successfully: revision 0
    /// desktops never send kShutdown, and Chromium's phone treats the tunnel closing as the end of the
    /// transaction (`v2_authenticator.cc`, the tunnel's close handler). An abnormal close (1006, the TCP
    /// connection dropping without a close frame) or a decryption failure is still an error.
    static func isOrderlyClose(_ error: TransactionError) -> Bool {
        guard let runtime = error.underlying as? RuntimeError, runtime.code == .closed else { return false }
        switch runtime.closeCode {
        case nil, .normalClosure?, .goingAway?: return true
        default: return false
        }
    }

    /// Whether `error` is a wait that ran out: after the phone has sent its response, a desktop that
    /// neither sends kShutdown nor closes within the wait (it keeps the tunnel open, as Chrome's
    /// desktop may until it drops the device) ends the transaction successfully too. Chromium's phone
    /// has no timeout there: once its response is out the transaction is done
    /// (`v2_authenticator.cc`, `transaction_done_`), and a later end of the tunnel is success.
    static func isSilence(_ error: TransactionError) -> Bool {
        (error.underlying as? RuntimeError)?.code == .timeout
    }
}
