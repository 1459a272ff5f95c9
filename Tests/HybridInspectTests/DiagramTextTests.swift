import CTAP2
import Crypto
@testable import HybridInspect
import Testing

/// The terminal diagram's arrows and the annotated CBOR under them.
@Suite struct DiagramTextTests {
    @Test("a title too long for its arrow is shortened, and the byte count is kept")
    func longTitleKeepsItsSize() {
        let label = SequenceDiagram.arrowLabel("CTAP response: CTAP2_ERR_OPERATION_DENIED (0x27)", bytes: 48)
        #expect(label.hasSuffix("… (48 B) ") && label.count + 4 <= SequenceDiagram.lane, "\(label)")
        let arrow = SequenceDiagram.arrow(label: label, rightwards: false)
        #expect(arrow.contains("(48 B)") && arrow.count == SequenceDiagram.lane, "\(arrow)")
        #expect(SequenceDiagram.arrowLabel("shutdown", bytes: 48) == " shutdown (48 B) ", "a short title as it is")
    }

}
